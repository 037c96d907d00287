"""``grid.py``'s verbs: parse (``cli``), validate (``validate``), call the engine. One module
per verb: ``run``, ``replay``, ``check_task``, ``serve_gateway``, ``new_framework``."""
