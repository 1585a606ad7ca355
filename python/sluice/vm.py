"""VM tools for people who test stream synchronization: recording instruction streams,
replaying them, and the stress run with the sync checker.

Recording: a context made with ``sluice.Context(record_path="run.rec")`` records every
instruction its VM receives (docs/instruction_record_format.md); the file is complete once
the context and its tensors are gone.
"""

from . import _sluice
