"""What a grid is made from, loaded and validated: tasks (``tasks``), content and swap
conditions (``conditions``), framework entries and their locked venvs (``venvs``), and the
strict data-model base they share (``schema``). Every problem is one line naming the file
and the field.

Modules:

* ``bytecode`` - Compile a venv's site-packages to bytecode, each distinct source compiled once per
  venvs folder;
* ``conditions`` - Content conditions (templates rendered into a task's content slot) and swap
  conditions;
* ``schema`` - Strict data models: a file with one bad field is rejected whole, naming the field;
* ``tasks`` - Task definitions (``tasks/<id>/task.toml`` + ``tasks/<id>/repo/``) and workspaces;
* ``venvs`` - One locked uv virtualenv per framework, described by ``venvs.toml``.
"""
