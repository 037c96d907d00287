"""Pure classification: stored evidence in, classification out; nothing here runs anything.

* ``evidence``   - what counts as a change, a read and an instruction carried out;
* ``claims``     - reading a completion claim from the agent's words (heuristics);
* ``classifier`` - ``classify(events, facts)``: every classification field;
* ``reactions``  - what a framework did with a fault (record field ``faults``).
"""
