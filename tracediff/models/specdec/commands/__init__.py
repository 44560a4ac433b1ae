"""specdec's own commands (``tracediff bench``, ``tracediff live``) and their tables.

The model lists them in :attr:`SpecDecModel.commands <tracediff.models.specdec.model.SpecDecModel>`;
the command line adds them under those names and imports a module only when its command
is run or its help is shown.
"""
