"""VM tools for people who test stream synchronization: recording instruction streams,
replaying them, the stress runs with the sync checker, and traces.

- Recording: :func:`recording_context` (or ``sluice.Context(record_path=...)``) records
  every instruction its VM receives (docs/instruction_record_format.md); the file is
  complete once the context and its tensors are gone (``del`` them, or leave a function).
- Replay: :func:`replay` re-executes a record, on the same devices or mapped onto others,
  with the sync checker optionally on, and compares the stored checksums.
- Stress: :func:`stress` runs random multi-stream eager programs, :func:`stress_control_flow`
  random static programs with cond and while, each checked against a sequential reference
  with the sync checker on; ``soft_sync=False`` shows the checks failing.
- Traces: ``static.Executor.run(..., trace_path="run.json")`` writes a Chrome trace.

Each report is a dict: the tool's JSON fields (the same line ``sluice stress`` /
``sluice replay`` print) plus ``ok`` / ``problems`` and the first problem found.
"""

import json

from . import _sluice
from ._context import Context


def recording_context(path, **options):
    """A new context that records every instruction to ``path`` (options as Context)."""
    return Context(record_path=str(path), **options)


def replay(path, device_map=None, check_sync=False, verify=True, repeat=1, ops="standard",
           scheduling="dedicated"):
    """Replays the record at ``path``.

    ``device_map`` maps recorded devices to devices to run on ({"sim:1": "sim:0"});
    ``ops`` is "standard" for records of programs and eager code, "stress" for records
    of :func:`stress`. Raises for a record that cannot be read (the error names the line);
    checksum mismatches, sync errors and kernel errors are in the report (``ok`` False).
    """
    raw = _sluice._replay(str(path), dict(device_map or {}), check_sync, verify, repeat, ops,
                          scheduling)
    report = json.loads(raw.pop("json"))
    report.update(raw)
    report["mismatch_list"] = list(report["mismatch_list"])
    return report


def stress(programs=100, seed=1, sim_devices=2, streams=4, tensors=8, ops=40, elements=64,
           jitter_us=0, soft_sync=True, scheduling="dedicated", timeout_s=120, record_path=""):
    """Random eager programs over cpu and ``sim_devices`` sim devices with ``streams``
    streams each, run with the sync checker on and compared bit for bit with a sequential
    reference. ``problems`` is True when a mismatch, sync error, hang or op error was
    found; with ``soft_sync=False`` it must be (the checks can fail)."""
    raw = _sluice._stress(programs, seed, sim_devices, streams, tensors, ops, elements,
                          jitter_us, soft_sync, scheduling, timeout_s, str(record_path))
    report = json.loads(raw.pop("json"))
    report.update(raw)
    return report


def stress_control_flow(programs=100, seed=1, streams=2, device="sim:0", jitter_us=0,
                        soft_sync=True, inputs=3, ops=10, depth=2, max_trips=4, elements=8,
                        scheduling="dedicated", timeout_s=120):
    """Random static programs with nested cond and while, run through an executor on
    ``device`` with ``streams`` compute streams, the sync checker on, each fetch compared
    with a sequential evaluation. ``soft_sync=False`` skips the stream analysis."""
    raw = _sluice._stress_control_flow(programs, seed, streams, device, jitter_us, soft_sync,
                                       inputs, ops, depth, max_trips, elements, scheduling,
                                       timeout_s)
    report = json.loads(raw.pop("json"))
    report.update(raw)
    return report


__all__ = ["recording_context", "replay", "stress", "stress_control_flow"]
