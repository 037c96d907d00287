"""Pure classification: stored evidence in, classification out; nothing here runs anything.

Modules:

* ``claims`` - reading a completion claim from the agent's words (heuristics);
* ``classifier`` - ``classify(events, facts)``: every classification field;
* ``conclusion`` - What a long report concludes: the markdown structure of a free-text report, read
  before its words;
* ``evidence`` - what counts as a change, a read and an instruction carried out;
* ``judge`` - The claim judge: a model asked to read the agent's final report, a second reader with
  no authority;
* ``limits`` - Which of a run's limits it hit, and whether a limit, not the agent, ended its work;
* ``outcomes`` - Verdicts another harness recorded: ``grid.py check --outcome-from FILE``;
* ``reactions`` - what a framework did with a fault (record field ``faults``);
* ``shell`` - What a shell command an agent ran does to files: the one parser for every agent's
  shell;
* ``tables`` - The tables a classification depends on, as entries a ledger records and compares;
* ``transcripts`` - An agent's transcript in the forms other runtimes write, read as the harness's
  events.
"""
