"""The ``pfxab`` command line: the parser and entry point (:mod:`.main`) and one module per sub-command
(:mod:`.commands`)."""
