"""The one error the judge raises when it cannot start here (re-exported by sandbox/bwrap.py)."""


class SandboxUnavailable(RuntimeError):
    """The configured isolation, or a compiler the problems need, is missing here; the message
    says how to fix it."""
