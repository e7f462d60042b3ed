"""The judge core, at the bottom of the stack: everything that judges an exchange and decides a run.

The document (``spec``, ``spec_source``, ``errata``, ``policies``, ``contract``), requests and
answers (``case``, ``exchange``, ``sse``, ``wire``), the requirements and their ``checks``,
the tallies and the run's typed record (``results``, ``run_info``, ``examples``, ``record``),
the verdict and the one ``decide()`` (``verdict``, ``decision``), the run told as events
(``events``) and the one judging function (``judge``). Imports no generator, run, report or front-door
code (tests/test_layers.py reads every module). Importing this package loads nothing.
"""
