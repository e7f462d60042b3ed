"""The judge core, at the bottom of the stack: everything that judges an exchange and decides a run.

The document (``spec``, ``spec_source``, ``errata``, ``policies``, ``contract``), requests and
answers (``case``, ``exchange``, ``sse``, ``wire``), the requirements and their ``checks``,
the tallies (``results``), the run record and the one ``decide()`` (``record``, ``verdict``)
and the one judging function (``judge``). Imports no generator, run, report or front-door
code (tests/test_layers.py reads every module). Importing this package loads nothing.
"""
