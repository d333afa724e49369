"""Shared logs from Python's ``logging``: :class:`LogHandler` writes records to a
:class:`shoal.Log`, and :class:`LogLevel` names the levels every Shoal binding uses."""

import enum
import logging

__all__ = ["LogHandler", "LogLevel"]


class LogLevel(enum.IntEnum):
    """The level numbers Shoal's bindings write (the log itself gives levels no meaning):
    the syslog severities, most severe first, and TRACE below DEBUG."""

    EMERGENCY = 0
    ALERT = 1
    CRITICAL = 2
    ERROR = 3
    WARNING = 4
    NOTICE = 5
    INFO = 6
    DEBUG = 7
    TRACE = 8


# The attributes every logging.LogRecord has: whatever else a record carries came from
# `extra=` (or a filter), and becomes a field.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def _bytes(v):
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    return str(v).encode("utf-8", "surrogateescape")


class LogHandler(logging.Handler):
    """A ``logging.Handler`` that appends each record to a shared log (``store.log(...)``),
    so that the records of every process writing through one come out of its readers
    interleaved, in order.

    A record becomes a log record of level :meth:`level_of` ``(record.levelno)``, whose
    message is the formatted record (by default its message, then the traceback of
    ``exc_info`` and the ``stack_info``), with the fields ``target`` (the logger's name,
    under the key Rust's ``tracing`` and ``log`` adapters give a target) and one per
    ``extra`` attribute (str and bytes as they are, other values as ``str()`` gives them).
    A message too large for the log is cut to fit, with a field ``truncated`` giving how
    many bytes were cut. Errors go to ``handleError``, as with every handler.
    ``timeout``: how long an append to a log of the wait policy waits for room (None: the
    store's lock timeout).
    """

    def __init__(self, log, level=logging.NOTSET, *, timeout=None):
        super().__init__(level)
        self.log = log
        self.timeout = timeout

    @staticmethod
    def level_of(levelno):
        """The :class:`LogLevel` of a ``logging`` level number: CRITICAL and above to
        CRITICAL, ERROR, WARNING, INFO and DEBUG to theirs (a level between two to the
        lower one's), below DEBUG to TRACE."""
        if levelno >= logging.CRITICAL:
            return LogLevel.CRITICAL
        if levelno >= logging.ERROR:
            return LogLevel.ERROR
        if levelno >= logging.WARNING:
            return LogLevel.WARNING
        if levelno >= logging.INFO:
            return LogLevel.INFO
        if levelno >= logging.DEBUG:
            return LogLevel.DEBUG
        return LogLevel.TRACE

    def fields_of(self, record):
        """The fields of a log record: ``target`` (the logger's name) and the record's ``extra`` attributes,
        as (key, value) pairs of bytes."""
        fields = [(b"target", _bytes(record.name))]
        for k, v in record.__dict__.items():
            if k not in _STANDARD and not k.startswith("_"):
                fields.append((_bytes(k), _bytes(v)))
        return fields

    def emit(self, record):
        """Appends the record to the log."""
        try:
            message = _bytes(self.format(record))
            fields = self.fields_of(record)
            room = self.log.max_record - sum(8 + len(k) + len(v) for k, v in fields)
            if len(message) > room:
                # The field that says so takes room too: 8 bytes, its key, its value.
                room -= 8 + len(b"truncated") + len(str(len(message)))
                cut = max(room, 0)
                # Not in the middle of a UTF-8 sequence.
                while 0 < cut < len(message) and message[cut] & 0xC0 == 0x80:
                    cut -= 1
                kept = message[:cut]
                fields.append((b"truncated", str(len(message) - len(kept)).encode()))
                message = kept
            self.log.append(message, self.level_of(record.levelno), fields, self.timeout)
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
