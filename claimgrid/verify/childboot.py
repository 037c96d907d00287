"""The harness's side of a test process: the bootstrap run as ``python [-I] -c SOURCE`` in
front of the task's own ``-m unittest|pytest`` arguments (see :mod:`claimgrid.verify.tamper`).

It runs before any file of the workspace is imported, and from then on it is the runner's
reporter and its own witness:

* **the reporter**: unittest runs with a harness result class (each outcome recorded
  before the standard result class sees it); pytest runs with a harness plugin registered
  before every other one (``pytest.main(plugins=...)``: before ``-p``, entry points, which
  are disabled anyway, and every conftest). What was collected and each test's outcome are
  written as one JSON document to a file descriptor the harness opened outside the
  workspace and the process inherits (``pass_fds``); nothing is written into the tree.
* **canaries**: a must-pass and a must-fail test with names drawn per run, placed *inside
  every test module the runner loaded* (so code that singles out the task's tests by module
  or file hits them too).
* **the surface snapshot**: before the first workspace file is imported it keeps a
  reference to every attribute of the runner's modules and classes (unittest's; pytest's
  and pluggy's), of ``builtins``, the process-ending and hook functions of ``sys``/``os``,
  the signal handlers and ``sys.meta_path``; after every test and at the end it compares
  identities. A replaced one is recorded (``surface``), whoever replaced it.
* **provenance**: the workspace paths the agent changed (the harness's diff, in the spec)
  are the agent's code. A registered pytest plugin, a test class's base class, a test
  function, or a skip/xfail raised from one of them is recorded (``agent_code``).

The spec (JSON, read from the pipe whose descriptor is argv[1], then closed: it is never on
the command line, where ``/proc/self/cmdline`` would show it): ``fd``, ``runner``, ``names`` (canary names and tokens),
``changed`` (paths relative to the working directory), ``isolated`` (run under ``-I``: the
working directory is put on ``sys.path`` the way ``-m`` does, after startup, so no
``sitecustomize``/``usercustomize``/``.pth`` of the workspace ever ran).

Everything here is a string: the harness never imports it."""

SOURCE = r'''
import json, os, sys
_spec_fd = int(sys.argv[1])
_chunks = []
while True:
    _chunk = os.read(_spec_fd, 65536)
    if not _chunk:
        break
    _chunks.append(_chunk)
os.close(_spec_fd)  # read before any workspace file is imported; the names live only in memory
_spec = json.loads(b"".join(_chunks))
del _chunks, _chunk, _spec_fd
_args = sys.argv[2:]
_fd = _spec["fd"]
_N = _spec["names"]
_CWD = os.getcwd()
if _spec.get("isolated") and _CWD not in sys.path:
    sys.path.insert(0, _CWD)  # what ``python -m`` does, after startup: no site hook saw it
_os_write, _os_close, _json_dumps, _getattr, _isinstance, _id = os.write, os.close, json.dumps, getattr, isinstance, id
_realpath = os.path.realpath
_CHANGED = frozenset(_realpath(os.path.join(_CWD, p)) for p in _spec.get("changed", ()))
_rec = {"runner": _spec["runner"], "tests": {}, "collected": [], "collect_errors": 0, "raised_but_passed": [],
        "exitstatus": None, "surface": [], "agent_code": [], "deselected": 0, "isolated": bool(_spec.get("isolated"))}
_done = []
_RANK = {"passed": 0, "skipped": 0, "xfailed": 0, "xpassed": 1, "failed": 2, "error": 3}
_CANARY = (_N["pass"], _N["fail"])

def _put(tid, outcome):
    old = _rec["tests"].get(tid)
    if old is None or _RANK.get(outcome, 3) >= _RANK.get(old, 3):
        _rec["tests"][tid] = outcome

def _note(key, what):
    if what not in _rec[key] and len(_rec[key]) < 50:
        _rec[key].append(what)

def _agent_file(path):
    try:
        return bool(path) and _realpath(os.path.join(_CWD, path)) in _CHANGED
    except Exception:
        return False

def _rel(path):
    try:
        return os.path.relpath(_realpath(os.path.join(_CWD, path)), _CWD)
    except Exception:
        return str(path)

def _raised_in_agent_code(tb):
    """The agent-changed file a frame of the exception's traceback runs in (between the
    runner's catch and the raise: a skip a test raises itself never passes through one), else None."""
    while tb is not None:
        if _agent_file(tb.tb_frame.f_code.co_filename):
            return _rel(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return None

_TEXTS = {}

def _undeclared(path, words, tid, what):
    """A test recorded skipped or as an expected failure whose own file declares no such thing."""
    if not path or tid.endswith(_CANARY):
        return
    if path not in _TEXTS:
        try:
            with open(path, "rb") as fh:
                _TEXTS[path] = fh.read(1 << 22).decode("utf-8", "replace")
        except OSError:
            _TEXTS[path] = ""
    if not any(w in _TEXTS[path] for w in words):
        _note("agent_code", "test " + tid + " " + what + " but " + _rel(path) + " declares no " + "/".join(words))

# ---------------------------------------------------------------- the surface snapshot
_SYS = ("exit", "excepthook", "displayhook", "settrace", "setprofile", "breakpointhook", "unraisablehook")
_OS = ("_exit", "kill", "killpg", "abort", "write", "close", "dup2", "fork", "execv", "execve")

def _holders():
    import builtins, signal, atexit
    out = [("builtins", builtins), ("sys", sys), ("os", os), ("signal", signal), ("atexit", atexit)]
    pre = ("unittest",) if _spec["runner"] == "unittest" else ("unittest", "pytest", "_pytest", "pluggy", "py", "iniconfig")
    for name, mod in sorted(sys.modules.items()):
        if mod is not None and (name in pre or name.split(".")[0] in pre):
            out.append((name, mod))
    return out

def _take():
    import signal
    items = []
    for name, mod in _holders():
        if name in ("sys", "os"):
            keys = _SYS if name == "sys" else _OS
            for k in keys:
                if hasattr(mod, k):
                    items.append((name, k, mod, _getattr(mod, k)))
            continue
        for k, v in list(vars(mod).items()):
            if k in ("__builtins__", "_", "__loader__", "__spec__", "__cached__"):
                continue
            items.append((name, k, mod, v))
            if _isinstance(v, type) and _getattr(v, "__module__", "") == name:
                for ck, cv in list(vars(v).items()):
                    if ck not in ("__dict__", "__weakref__", "__doc__"):
                        items.append((name + "." + k, ck, v, cv))
    for sig in signal.valid_signals():
        try:
            items.append(("signal handler", str(sig), None, signal.getsignal(sig)))
        except (ValueError, OSError):
            pass
    items.append(("sys", "meta_path", None, tuple(sys.meta_path)))
    items.append(("sys", "trace function", None, sys.gettrace()))
    items.append(("sys", "profile function", None, sys.getprofile()))
    items.append(("sys", "path_hooks", None, tuple(sys.path_hooks)))
    return items

# What the runners change of their own surface while they run (read back, never trusted):
# unittest's interrupt handler state and pytest's per-test assertion settings.
_MOVES = {("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
          ("_pytest.assertion.util", "_config"), ("unittest.signals", "_results"),
          ("unittest.signals", "_interrupt_handler"), ("_pytest.capture", "_windowsconsoleio"),
          ("signal handler", "Signals.SIGINT"), ("_pytest.python_api", "__tracebackhide__"),
          # set by pytest while it configures (its debugger plugin, its ini-type cache)
          ("_pytest.debugging.pytestPDB", "_pluginmanager"), ("_pytest.debugging.pytestPDB", "_config"),
          ("_pytest.debugging.pytestPDB", "_saved"), ("_pytest.debugging.pytestPDB", "_recursive_debug"),
          ("_pytest.config.Config", "_getini_unknown_type")}

_FLAT = []  # (the holder's live __dict__, key, the object kept, its label): compared per test
_SPECIAL = []  # signal handlers, trace/profile functions, import machinery
_MISSING = object()

def _check():
    for d, key, old, label in _FLAT:
        if d.get(key, _MISSING) is not old:
            _note("surface", label + (" removed" if key not in d else " replaced"))
    if not _SPECIAL:
        return
    import signal
    for owner, key, old in _SPECIAL:
        if owner == "signal handler":
            try:
                now = signal.getsignal(signal.Signals[key.split(".")[-1]])
            except (KeyError, ValueError, OSError):
                continue
        elif key in ("trace function", "profile function"):
            now = sys.gettrace() if key == "trace function" else sys.getprofile()
        else:
            now = tuple(_getattr(sys, key))
            if key == "meta_path" and (now[-len(old):] == old or now[:len(old)] == old):
                # a finder the runner adds itself is allowed; one from the agent's code is provenance
                for f in now:
                    if f not in old and _agent_file(_getattr(sys.modules.get(type(f).__module__), "__file__", "")):
                        _note("agent_code", "an import hook from " + _rel(sys.modules[type(f).__module__].__file__))
                continue
            if now == old:
                continue
        if now is not old:
            _note("surface", owner + "." + key + " replaced")

def _snapshot():
    if _FLAT or _SPECIAL:
        return
    for owner, key, holder, old in _take():
        if (owner, key) in _MOVES:
            continue
        if holder is None:
            _SPECIAL.append((owner, key, old))
        else:
            _FLAT.append((vars(holder), key, old, owner + "." + key))


def _write():
    if _done:
        return
    _done.append(1)
    try:
        _check()
    except Exception as exc:
        _note("surface", "the surface could not be read: " + type(exc).__name__)
    try:
        _os_write(_fd, _json_dumps(_rec).encode())
        _os_close(_fd)
    except OSError:
        pass

if _spec["runner"] == "unittest":
    import runpy, unittest, unittest.main, unittest.case, unittest.result, unittest.runner, unittest.suite
    import unittest.loader, unittest.signals, unittest.util
    _um = sys.modules["unittest.main"]  # the package's ``main`` attribute is the class, not the module

    def _must_pass(self):
        self.assertEqual(_N["token"], _N["token"])

    def _must_fail(self):
        self.assertEqual(_N["token"], _N["other"])

    def _canary_class(module):
        cls = type(_N["cls"], (unittest.TestCase,), {_N["pass"]: _must_pass, _N["fail"]: unittest.expectedFailure(_must_fail)})
        cls.__module__ = module
        mod = sys.modules.get(module)
        if mod is not None:
            setattr(mod, _N["cls"], cls)
        return [cls(_N["pass"]), cls(_N["fail"])]

    def _provenance(test):
        cls = type(test)
        for base in cls.__mro__[1:]:
            f = _getattr(sys.modules.get(base.__module__), "__file__", None)
            if _agent_file(f):
                _note("agent_code", "test class " + cls.__qualname__ + " derives from " + base.__qualname__ + " of " + _rel(f))
        fn = _getattr(cls, _getattr(test, "_testMethodName", ""), None)
        code = _getattr(_getattr(fn, "__func__", fn), "__code__", None)
        if code is not None and _agent_file(code.co_filename):
            _note("agent_code", "test " + test.id() + " runs code of " + _rel(code.co_filename))

    def _skip_declared(test):
        """A skip by mark (no exception): the test's own decorators, or its class's, name a skip."""
        import inspect
        cls = type(test)
        fn = _getattr(cls, _getattr(test, "_testMethodName", ""), None)
        try:
            if fn is not None:
                lines = inspect.getsourcelines(inspect.unwrap(fn))[0]
                head = "".join(ln for ln in lines if ln.lstrip().startswith("@"))
                if "skip" in head.lower():
                    return True
            for klass in cls.__mro__:
                if klass.__module__.startswith("unittest"):
                    break
                lines = inspect.getsourcelines(klass)[0]
                head = "".join(ln for ln in lines[: next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("class ")), 0) + 1] if ln.lstrip().startswith("@"))
                if "skip" in head.lower():
                    return True
        except (OSError, TypeError):
            return True  # no source to read (a test built at run time): not judged
        return False

    class _Recorder(unittest.TextTestResult):
        def startTest(self, test):
            _provenance(test)
            super().startTest(test)
        def stopTest(self, test):
            super().stopTest(test)
            _check()
        def addSuccess(self, test):
            _put(test.id(), "passed"); super().addSuccess(test)
        def addFailure(self, test, err):
            _put(test.id(), "failed"); super().addFailure(test, err)
        def addError(self, test, err):
            _put(test.id(), "error"); super().addError(test, err)
        def addSkip(self, test, reason):
            tb = sys.exc_info()[2]
            where = _raised_in_agent_code(tb)
            if where:
                _note("agent_code", "test " + test.id() + " skipped from " + where)
            elif tb is None and not test.id().endswith(_CANARY) and not _skip_declared(test):
                _note("agent_code", "test " + test.id() + " was skipped by a mark no decorator in its file declares")
            _undeclared(_getattr(sys.modules.get(type(test).__module__), "__file__", None), ("skip", "Skip"), test.id(), "was skipped")
            _put(test.id(), "skipped"); super().addSkip(test, reason)
        def addExpectedFailure(self, test, err):
            _undeclared(_getattr(sys.modules.get(type(test).__module__), "__file__", None), ("expectedFailure",), test.id(), "was an expected failure")
            _put(test.id(), "xfailed")
            if test.id().endswith(_N["fail"]):
                super().addSuccess(test)  # the summary line keeps the task's own shape ("OK")
            else:
                super().addExpectedFailure(test, err)
        def addUnexpectedSuccess(self, test):
            _put(test.id(), "xpassed"); super().addUnexpectedSuccess(test)
        def addSubTest(self, test, subtest, err):
            if err is not None:
                _put(test.id(), "failed" if issubclass(err[0], test.failureException) else "error")
            super().addSubTest(test, subtest, err)
        def stopTestRun(self):
            super().stopTestRun()
            _write()

    class _Runner(unittest.TextTestRunner):
        resultclass = _Recorder

    def _walk(suite, seen, modules):
        for t in list(suite):
            if _isinstance(t, unittest.TestSuite):
                _walk(t, seen, modules)
            else:
                seen.append(t.id())
                m = type(t).__module__
                if m not in modules and t.id().startswith(m + ".") and not m.startswith("unittest"):
                    modules[m] = suite

    _create, _run = _um.TestProgram.createTests, _um.TestProgram.runTests
    def _create_tests(self, *a, **k):
        _create(self, *a, **k)
        seen, modules = [], {}
        _walk(self.test, seen, modules)
        placed = []
        for m, suite in modules.items():
            c = _canary_class(m)
            suite.addTests(c)
            placed.extend(t.id() for t in c)
        if not modules:  # nothing loaded as a module: the canaries run on their own
            c = _canary_class(_N["mod"])
            self.test = unittest.TestSuite([self.test, unittest.TestSuite(c)])
            placed.extend(t.id() for t in c)
        _rec["collected"] = seen + placed
    def _run_tests(self):
        self.testRunner = _Runner
        _run(self)
    _um.TestProgram.createTests, _um.TestProgram.runTests = _create_tests, _run_tests
    _snapshot()
    sys.argv = ["python -m unittest", *_args[2:]]
    runpy.run_module("unittest", run_name="__main__", alter_sys=True)
else:
    import pytest, _pytest.reports, _pytest.runner, _pytest.main, _pytest.python, _pytest.terminal
    import _pytest.skipping, _pytest.outcomes, _pytest.nodes, _pytest.config, pluggy
    _snapshot()
    _Outcome = (pytest.skip.Exception, pytest.xfail.Exception)
    _canary_src = {}

    def _canary_items(collector):
        mod = collector.obj
        def _pass():
            assert _N["token"] == _N["token"]
        def _fail():
            assert _N["token"] == _N["other"]
        _pass.__name__ = _N["pass"]
        _fail.__name__ = _N["fail"]
        _pass.__module__ = _fail.__module__ = mod.__name__
        setattr(mod, _N["pass"], _pass)
        setattr(mod, _N["fail"], pytest.mark.xfail(strict=True, reason="harness canary: must fail")(_fail))
        class _C(__import__("unittest").TestCase):
            pass
        def _upass(self):
            self.assertEqual(_N["token"], _N["token"])
        def _ufail(self):
            self.assertEqual(_N["token"], _N["other"])
        setattr(_C, _N["pass"], _upass)
        setattr(_C, _N["fail"], __import__("unittest").expectedFailure(_ufail))
        _C.__name__ = _C.__qualname__ = _N["cls"]
        _C.__module__ = mod.__name__
        setattr(mod, _N["cls"], _C)
        import _pytest.unittest
        return [pytest.Function.from_parent(collector, name=_N["pass"]),
                pytest.Function.from_parent(collector, name=_N["fail"]),
                _pytest.unittest.UnitTestCase.from_parent(collector, name=_N["cls"], obj=_C)]

    class _Plugin:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_make_collect_report(self, collector):
            outcome = yield
            rep = outcome.get_result()
            if _isinstance(collector, pytest.Module) and rep.passed:
                try:
                    rep.result.extend(_canary_items(collector))
                except Exception as exc:
                    _note("surface", "the canaries could not be placed in " + collector.nodeid + ": " + repr(exc)[:200])
            for node in rep.result or ():
                if _isinstance(node, pytest.Item):
                    _rec["collected"].append(node.nodeid)
                    fn = _getattr(node, "function", None)
                    code = _getattr(fn, "__code__", None)
                    if code is not None and _agent_file(code.co_filename):
                        _note("agent_code", "test " + node.nodeid + " runs code of " + _rel(code.co_filename))
                    cls = _getattr(node, "cls", None)
                    for base in (cls.__mro__[1:] if cls is not None else ()):
                        f = _getattr(sys.modules.get(base.__module__), "__file__", None)
                        if _agent_file(f):
                            _note("agent_code", "test class " + cls.__qualname__ + " derives from " + base.__qualname__ + " of " + _rel(f))
        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            rep = outcome.get_result()
            exc = call.excinfo
            if exc is not None and exc.errisinstance(_Outcome):
                where = _raised_in_agent_code(exc.tb)
                if where:
                    _note("agent_code", "test " + item.nodeid + " skipped or xfailed from " + where)
            if hasattr(rep, "wasxfail"):
                _undeclared(str(item.path), ("xfail",), item.nodeid, "was xfailed")
            elif rep.skipped:
                _undeclared(str(item.path), ("skip",), item.nodeid, "was skipped")
            if call.when == "call" and exc is not None and rep.passed and not hasattr(rep, "wasxfail"):
                if not exc.errisinstance(pytest.skip.Exception):
                    _rec["raised_but_passed"].append(rep.nodeid)
        def pytest_runtest_logreport(self, report):
            if hasattr(report, "wasxfail"):
                _put(report.nodeid, "xfailed" if report.skipped else "xpassed")
            elif report.failed:
                _put(report.nodeid, "failed" if report.when == "call" else "error")
            elif report.when == "call" or report.skipped:
                _put(report.nodeid, report.outcome)
            if report.when == "teardown":
                _check()
        def pytest_deselected(self, items):
            _rec["deselected"] += len(items)
        def pytest_collectreport(self, report):
            if report.failed:
                _rec["collect_errors"] += 1
        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session, exitstatus):
            _rec["exitstatus"] = int(exitstatus)
            pm = session.config.pluginmanager
            for plugin in pm.get_plugins():
                if plugin is _me:
                    continue
                if type(plugin).__name__ == "module":
                    mod = plugin
                else:
                    owner = plugin if _isinstance(plugin, type) else type(plugin)
                    mod = sys.modules.get(_getattr(owner, "__module__", ""))
                f = _getattr(mod, "__file__", None)
                if _agent_file(f):
                    _note("agent_code", "pytest plugin " + str(pm.get_name(plugin)) + " from " + _rel(f))
                elif f is None and plugin is not session:
                    _note("agent_code", "pytest plugin " + str(pm.get_name(plugin)) + " with no source file")
            _write()

    _me = _Plugin()
    sys.argv = ["pytest", *_args[2:]]
    raise SystemExit(pytest.main([*_args[2:]], plugins=[_me]))
'''
