"""delayq - Python binding of libdelayq, a delayed-job queue over Redis.

Pure ctypes over the library's C ABI: no compiled shim.  It loads the
installed libdelayq.so.0 (ctypes.util.find_library("delayq")), or the file
named by the environment variable DELAYQ_LIB (tests point it into a build
directory).

    import delayq

    with delayq.Client("redis://127.0.0.1:6379", max_attempts=5) as c:
        job_id, outcome = c.push("orders", b'{"order": 42}', delay_ms=30 * 60000)
        for job in c.poll("orders", max=10, lease_ms=30000, wait_ms=5000):
            handle(job.payload)
            job.ack()

Errors raise DelayqError subclasses (StaleToken, NotFound, InvalidArgument,
ConnectionFailed, ...) carrying .code (the negative DQ_E* number), .name
("ESTALE") and .message (the library's detailed text).

A Client is safe to share between threads: calls on one client are
serialized by a lock (the C client is not thread-safe).  Blocking calls
(poll with wait_ms) release the GIL.  Times are int milliseconds, measured
by the Redis server's clock (see delayq.h).
"""
import ctypes
import ctypes.util
import os
import threading
import time

__all__ = [
    "Client", "Job", "DelayqError", "InvalidArgument", "PayloadTooBig",
    "BadURI", "ConnectionFailed", "Timeout", "AuthFailed", "RedisError",
    "RedisOutOfMemory", "ProtocolError", "StaleToken", "NotFound",
    "NotSupported", "Closed", "Canceled", "NotEnoughReplicas", "NoMemory",
    "version", "version_number", "strerror", "errname", "library_path",
    "PUSHED", "KEPT", "REPLACED", "DONE", "CANCELED_PENDING", "CANCEL_BUSY",
    "CANCELED_INFLIGHT", "LIST_SCHEDULED", "LIST_INFLIGHT", "LIST_DEAD",
    "Consumer", "JOB_OK", "JOB_RETRY", "JOB_FAIL", "JobInfo", "REASON_MAX",
    "SCHEDULED", "DUE", "INFLIGHT", "DEAD", "QueueList", "QUEUES_MAX",
    "MOVED", "REVIVED", "UNKNOWN",
    "DEBOUNCE_CREATED", "DEBOUNCE_MOVED", "DEBOUNCE_FOLLOWUP",
    "GROUP_STATS_MAX",
]

# ---- Constants of delayq.h (macros are not in the ABI) -------------------

QUEUE_MAX = 200
ID_MAX = 128
ID_BUF = ID_MAX + 1
TOKEN_BUF = 24
DELAY_MAX = 3153600000000
AT_MAX = 253402300799999
LEASE_MIN = 1
LEASE_MAX = 604800000
BATCH_MAX = 100000
POLL_MAX = 1000
MULTI_MAX = 64       # queues in one poll_wait_multi
WEIGHT_MAX = 1000    # a queue's weight
_PRIO_STRICT, _PRIO_WEIGHTED = 1, 2
_COPT_PRIORITY = 10
REASON_MAX = 1024
QUEUES_MAX = 100000  # queues one Client.queues lists (DQ_QUEUES_MAX)
GROUP_STATS_MAX = 1000  # groups one Client.group_stats reads
# dq_get's job states (DQ_JOB_*), as JobInfo.state names them.
SCHEDULED, DUE, INFLIGHT, DEAD = "scheduled", "due", "inflight", "dead"
_STATES = {1: SCHEDULED, 2: DUE, 3: INFLIGHT, 4: DEAD}

_PUSH_KEEP, _PUSH_REPLACE, _PUSH_AT = 0, 1, 2
# Push options (DQ_PUSHOPT_*).
_PO_MAX_ATTEMPTS, _PO_EXPIRE_AT, _PO_EXPIRE_IN_MS = 1, 2, 3
_PO_EVERY_MS, _PO_TZ_OFFSET_MIN, _PO_CRON = 4, 5, 6
_PO_GROUP = 8
_PO_PRIORITY = 9
EVERY_MIN = 10
TZ_OFFSET_MAX = 840
PUSHED, KEPT, REPLACED, DONE = "pushed", "kept", "replaced", "done"
_OUTCOMES = {1: PUSHED, 2: KEPT, 3: REPLACED, 4: DONE}
# Debounced pushes (DQ_PUSH_DEBOUNCE, DQ_PUSHOPT_DEBOUNCE_MAX_MS) and their
# outcomes.
_PUSH_DEBOUNCE = 4
_PO_DEBOUNCE_MAX_MS = 7
DEBOUNCE_CREATED, DEBOUNCE_MOVED, DEBOUNCE_FOLLOWUP = (
    "debounce_created", "debounce_moved", "debounce_followup")
_OUTCOMES.update({5: DEBOUNCE_CREATED, 6: DEBOUNCE_MOVED,
                  7: DEBOUNCE_FOLLOWUP})
_CANCEL_INFLIGHT = 1
CANCELED_PENDING, CANCEL_BUSY, CANCELED_INFLIGHT = 1, 2, 3
# reschedule/promote (DQ_RESCHED_*): flags, and each job's outcome by name
# (in flight and dead jobs are left alone; revived: dead, back to pending).
_RESCHED_REVIVE, _RESCHED_AT = 1, 2
MOVED, REVIVED, UNKNOWN = "moved", "revived", "unknown"
_RESCHED_OUTCOMES = {0: UNKNOWN, 1: MOVED, 2: INFLIGHT, 3: DEAD, 4: REVIVED}
_NACK_DEAD = 1
# Consumer outcomes (delayq-consumer.h).
JOB_OK, JOB_RETRY, JOB_FAIL = 1, 2, 3
_COPT = {
    "concurrency": 1, "lease_ms": 2, "retry_base_ms": 5, "retry_max_ms": 6,
    "retry_jitter": 7, "max_attempts": 8,
}
_COPT_RETRY_BACKOFF = 4
# Queue settings stored in Redis (dq_config_set/get): values of backoff
# and expired; UNSET (None in config_get) is a setting not set.
BACKOFF_FIXED, BACKOFF_EXPONENTIAL = 1, 2
EXPIRED_DEAD, EXPIRED_DROP = 0, 1
LAYOUT_DEFAULT, LAYOUT_COMPACT, LAYOUT_COMPACT_PUSH = 0, 1, 2
_BACKOFF = {"fixed": BACKOFF_FIXED, "exponential": BACKOFF_EXPONENTIAL}
_UNSET = -1
_SET_WORDS = {"backoff": _BACKOFF,
              "expired": {"dead": EXPIRED_DEAD, "drop": EXPIRED_DROP},
              "layout": {"default": LAYOUT_DEFAULT,
                         "compact": LAYOUT_COMPACT,
                         "compact-push": LAYOUT_COMPACT_PUSH}}
_SET_COUNT = 14
# dq_list (only in libraries that define it).
LIST_SCHEDULED, LIST_INFLIGHT, LIST_DEAD = 1, 2, 3

_OPT_INT = {
    "connect_timeout_ms": 1, "command_timeout_ms": 2, "max_payload": 3,
    "max_attempts": 4, "wait_cap_ms": 5, "wait_replicas": 6,
    "wait_replicas_timeout_ms": 7, "done_ttl_ms": 8, "partitions": 9,
    "lease_ms": 11, "layout": 12,
}
# Options that are on or off: True/False (or 1/0), given to the library as
# int 1/0.
_OPT_BOOL = {"counters": 10, "durable": 13}
_OPT_STR = {
    "namespace": 100, "username": 101, "password": 102, "tls_ca_file": 103,
    "tls_cert_file": 104, "tls_key_file": 105, "tls_server_name": 106,
}

# Longest single dq_poll_wait slice: a wait is cut into slices this long so
# that Python signal handlers (Ctrl-C) run between them.
_WAIT_SLICE_MS = 1000


# ---- Errors ---------------------------------------------------------------

class DelayqError(Exception):
    """A failed libdelayq call: .code (negative int), .name ("ESTALE"),
    .message (the library's detailed message, or its static text)."""

    def __init__(self, code, message=None, name=None):
        self.code = code
        self.name = name or errname(code)
        self.message = message or strerror(code)
        super().__init__("%s (%s)" % (self.message, self.name))


class InvalidArgument(DelayqError, ValueError):
    """An argument was refused before anything was sent to Redis
    (ENULL, EINVAL, EQUEUE, EID, EDELAY, ELEASE)."""


class PayloadTooBig(InvalidArgument):
    """ETOOBIG: the payload is larger than the client's max_payload."""


class BadURI(InvalidArgument):
    """EURI: malformed or unsupported Redis URI."""


class ConnectionFailed(DelayqError, ConnectionError):
    """EIO: the connection to Redis failed or was lost."""


class Timeout(ConnectionFailed, TimeoutError):
    """ETIMEDOUT: Redis did not answer in time."""


class AuthFailed(ConnectionFailed):
    """EAUTH: Redis refused the credentials."""


class RedisError(DelayqError):
    """EREDIS: Redis returned an error."""


class RedisOutOfMemory(RedisError):
    """EOOM: Redis reached maxmemory."""


class ProtocolError(DelayqError):
    """EPROTO: unexpected reply from Redis."""


class StaleToken(DelayqError):
    """ESTALE: the lease token is stale; the job is no longer yours."""


class NotFound(DelayqError, LookupError):
    """ENOTFOUND: no such job."""


class NotSupported(DelayqError):
    """ENOTSUP: not supported by this build or server."""


class Closed(DelayqError):
    """ECLOSED: the client is closed."""


class Canceled(DelayqError):
    """ECANCELED: the operation was canceled."""


class NotEnoughReplicas(DelayqError):
    """EREPLICAS: written, but too few replicas acknowledged it."""


class NoMemory(DelayqError, MemoryError):
    """ENOMEM: out of memory."""


_CLASS_BY_NAME = {
    "ENULL": InvalidArgument, "EINVAL": InvalidArgument,
    "EQUEUE": InvalidArgument, "EID": InvalidArgument,
    "EDELAY": InvalidArgument, "ELEASE": InvalidArgument,
    "ETOOBIG": PayloadTooBig, "ENOMEM": NoMemory, "EURI": BadURI,
    "EIO": ConnectionFailed, "ETIMEDOUT": Timeout, "EAUTH": AuthFailed,
    "EREDIS": RedisError, "EPROTO": ProtocolError, "EOOM": RedisOutOfMemory,
    "ESTALE": StaleToken, "ENOTFOUND": NotFound, "ENOTSUP": NotSupported,
    "ECLOSED": Closed, "ECANCELED": Canceled, "EREPLICAS": NotEnoughReplicas,
}

# ---- Loading the library and declaring every function ---------------------


class _Client(ctypes.Structure):
    """Opaque dq_client."""


class _Options(ctypes.Structure):
    """Opaque dq_options."""


class _Jobs(ctypes.Structure):
    """Opaque dq_jobs."""


class _Job(ctypes.Structure):
    """Opaque dq_job."""


class _Consumer(ctypes.Structure):
    """Opaque dq_consumer."""


class _JobInfo(ctypes.Structure):
    """Opaque dq_job_info."""


class _PushOpts(ctypes.Structure):
    """Opaque dq_push_opts."""


class _QueueList(ctypes.Structure):
    """Opaque dq_queue_list."""


class _GroupList(ctypes.Structure):
    """Opaque dq_group_list."""


_P_CLIENT = ctypes.POINTER(_Client)
_P_OPTIONS = ctypes.POINTER(_Options)
_P_JOBS = ctypes.POINTER(_Jobs)
_P_JOB = ctypes.POINTER(_Job)
_c_int, _c_i64, _c_size = ctypes.c_int, ctypes.c_int64, ctypes.c_size_t
_c_str, _c_void = ctypes.c_char_p, ctypes.c_void_p
_P_I64 = ctypes.POINTER(_c_i64)
_P_INT = ctypes.POINTER(_c_int)
_P_SIZE = ctypes.POINTER(_c_size)
_P_STR = ctypes.POINTER(_c_str)
_P_CONSUMER = ctypes.POINTER(_Consumer)
_P_INFO = ctypes.POINTER(_JobInfo)
_P_PUSHOPTS = ctypes.POINTER(_PushOpts)
_P_QLIST = ctypes.POINTER(_QueueList)
_P_GLIST = ctypes.POINTER(_GroupList)
# Callback types of delayq-consumer.h (ctypes takes the GIL around them).
_HANDLER_FN = ctypes.CFUNCTYPE(_c_int, _P_CONSUMER, _P_JOB, _c_void)
_OUTCOME_CB = ctypes.CFUNCTYPE(None, _P_CONSUMER, _P_JOB, _c_int, _c_int,
                               _c_void)

# name: (restype, [argtypes]) for every function of delayq.h.
_PROTOTYPES = {
    "dq_version_number": (_c_int, []),
    "dq_version_string": (_c_str, []),
    "dq_strerror": (_c_str, [_c_int]),
    "dq_errname": (_c_str, [_c_int]),
    "dq_options_new": (_P_OPTIONS, []),
    "dq_options_free": (None, [_P_OPTIONS]),
    "dq_options_set_int": (_c_int, [_P_OPTIONS, _c_int, _c_i64]),
    "dq_options_set_str": (_c_int, [_P_OPTIONS, _c_int, _c_str]),
    "dq_open": (_c_int, [_c_str, _P_OPTIONS, ctypes.POINTER(_P_CLIENT)]),
    "dq_close": (None, [_P_CLIENT]),
    "dq_errmsg": (_c_str, [_P_CLIENT]),
    "dq_errcode": (_c_int, [_P_CLIENT]),
    "dq_warnings": (_c_str, [_P_CLIENT]),
    "dq_jobs_count": (_c_size, [_P_JOBS]),
    "dq_jobs_at": (_P_JOB, [_P_JOBS, _c_size]),
    "dq_jobs_free": (None, [_P_JOBS]),
    "dq_job_id": (_c_str, [_P_JOB]),
    "dq_job_payload": (_c_void, [_P_JOB, _P_SIZE]),
    "dq_job_attempt": (_c_i64, [_P_JOB]),
    "dq_job_due_ms": (_c_i64, [_P_JOB]),
    "dq_job_lease_deadline_ms": (_c_i64, [_P_JOB]),
    "dq_job_token": (_c_str, [_P_JOB]),
    "dq_job_dup": (_P_JOB, [_P_JOB]),
    "dq_job_free": (None, [_P_JOB]),
    # Payloads (const void *) are declared char *: ctypes then passes the
    # buffer of a bytes object as is, NUL bytes included (len is separate).
    "dq_push": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_size, _c_i64, _c_str,
                         _c_int, ctypes.c_char_p, _c_size, _P_INT]),
    "dq_push_at": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_size, _c_i64,
                            _c_str, _c_int, ctypes.c_char_p, _c_size, _P_INT]),
    "dq_push_batch": (_c_int, [_P_CLIENT, _c_str, _c_size, _P_STR, _P_SIZE,
                               _P_I64, _P_STR, _c_int, ctypes.c_char_p,
                               _P_INT]),
    "dq_cancel": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_int]),
    "dq_poll": (_c_int, [_P_CLIENT, _c_str, _c_int, _c_i64,
                         ctypes.POINTER(_P_JOBS), _P_I64]),
    "dq_poll_wait": (_c_int, [_P_CLIENT, _c_str, _c_int, _c_i64, _c_i64,
                              ctypes.POINTER(_P_JOBS)]),
    "dq_ack": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_str]),
    "dq_ack_batch": (_c_int, [_P_CLIENT, _c_str, _c_size, _P_STR, _P_STR,
                              _P_INT]),
    "dq_nack": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_str, _c_i64, _c_int]),
    "dq_extend": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_str, _c_i64,
                           _P_I64]),
    "dq_dead_list": (_c_int, [_P_CLIENT, _c_str, _c_i64, _c_int,
                              ctypes.POINTER(_P_JOBS)]),
    "dq_dead_requeue": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_i64]),
    "dq_dead_purge": (_c_int, [_P_CLIENT, _c_str, _c_str]),
    "dq_stats": (_c_int, [_P_CLIENT, _c_str, _P_I64, _P_I64, _P_I64, _P_I64,
                          _P_I64]),
}

# Functions that only some builds have: declared when present.  The
# libevent API (delayq-event.h: dq_async_*, dq_consumer_new/start/stop/
# running) needs a struct event_base from libevent itself and is not
# wrapped here.
_OPTIONAL_PROTOTYPES = {
    "dq_list": (_c_int, [_P_CLIENT, _c_str, _c_int, _c_i64, _c_int,
                         ctypes.POINTER(_P_JOBS), _P_I64]),
    "dq_counters": (_c_int, [_P_CLIENT, _c_str, _P_I64, _P_I64, _P_I64,
                             _P_I64]),
    # dq_get and failure reasons
    "dq_nack_reason": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_str, _c_i64,
                                _c_int, _c_str, _c_size]),
    "dq_job_last_error": (_c_void, [_P_JOB, _P_SIZE]),
    "dq_job_failed_ms": (_c_i64, [_P_JOB]),
    "dq_consumer_set_reason": (_c_int, [_P_CONSUMER, _P_JOB, _c_str,
                                        _c_size]),
    "dq_get": (_c_int, [_P_CLIENT, _c_str, _c_str, ctypes.POINTER(_P_INFO)]),
    "dq_job_info_state": (_c_int, [_P_INFO]),
    "dq_job_info_id": (_c_str, [_P_INFO]),
    "dq_job_info_due_ms": (_c_i64, [_P_INFO]),
    "dq_job_info_attempts": (_c_i64, [_P_INFO]),
    "dq_job_info_lease_deadline_ms": (_c_i64, [_P_INFO]),
    "dq_job_info_payload": (_c_void, [_P_INFO, _P_SIZE]),
    "dq_job_info_last_error": (_c_void, [_P_INFO, _P_SIZE]),
    "dq_job_info_failed_ms": (_c_i64, [_P_INFO]),
    "dq_job_info_now_ms": (_c_i64, [_P_INFO]),
    "dq_job_info_dup": (_P_INFO, [_P_INFO]),
    "dq_job_info_free": (None, [_P_INFO]),
    # queue settings stored in Redis, push options
    "dq_config_set": (_c_int, [_P_CLIENT, _c_str, _c_size, _P_INT, _P_I64]),
    "dq_config_get": (_c_int, [_P_CLIENT, _c_str, _c_size, _P_INT, _P_I64]),
    "dq_setting_name": (_c_str, [_c_int]),
    "dq_setting_by_name": (_c_int, [_c_str]),
    "dq_job_info_repeat": (_c_str, [_P_INFO]),
    "dq_job_info_group": (_c_str, [_P_INFO]),
    "dq_job_info_followup_ms": (_c_i64, [_P_INFO]),
    "dq_job_info_priority": (_c_int, [_P_INFO]),
    # pending jobs per due-time window, without reading them
    "dq_count_due": (_c_int, [_P_CLIENT, _c_str, _P_I64, _c_int, _P_I64,
                              _P_I64]),
    # push options (per job max attempts, expiry, repeat)
    "dq_push_opts_new": (_P_PUSHOPTS, []),
    "dq_push_opts_free": (None, [_P_PUSHOPTS]),
    "dq_push_opts_set": (_c_int, [_P_PUSHOPTS, _c_int, _c_i64]),
    "dq_push_opts_set_str": (_c_int, [_P_PUSHOPTS, _c_int, _c_str]),
    "dq_push_opts_errmsg": (_c_str, [_P_PUSHOPTS]),
    "dq_push_ex": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_size, _c_i64,
                            _c_str, _c_int, _P_PUSHOPTS, ctypes.c_char_p,
                            _c_size, _P_INT]),
    "dq_push_batch_ex": (_c_int, [_P_CLIENT, _c_str, _c_size, _P_STR,
                                  _P_SIZE, _P_I64, _P_STR, _c_int, _P_PUSHOPTS,
                                  ctypes.c_char_p, _P_INT]),
    # reschedule and promote pending jobs in place (the binding calls the
    # batch form for one id too)
    "dq_reschedule": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_i64, _c_int]),
    "dq_promote": (_c_int, [_P_CLIENT, _c_str, _c_str, _c_int]),
    "dq_reschedule_batch": (_c_int, [_P_CLIENT, _c_str, _c_size, _P_STR,
                                     _c_i64, _c_int, _P_INT]),
    # delayq-consumer.h
    "dq_consumer_set_int": (_c_int, [_P_CONSUMER, _c_int, _c_i64]),
    "dq_consumer_set_outcome_cb": (_c_int, [_P_CONSUMER, _OUTCOME_CB,
                                            _c_void]),
    "dq_consumer_done": (_c_int, [_P_CONSUMER, _P_JOB, _c_int, _c_i64]),
    "dq_consumer_backoff_ms": (_c_i64, [_P_CONSUMER, _c_i64]),
    "dq_consumer_errmsg": (_c_str, [_P_CONSUMER]),
    "dq_consumer_free": (None, [_P_CONSUMER]),
    "dq_consumer_new_sync": (_c_int, [_P_CLIENT, _c_str, _HANDLER_FN,
                                      _c_void,
                                      ctypes.POINTER(_P_CONSUMER)]),
    "dq_consumer_run": (_c_int, [_P_CONSUMER]),
    "dq_consumer_interrupt": (None, [_P_CONSUMER]),
    # several queues
    "dq_poll_wait_multi": (_c_int, [_P_CLIENT, _c_size, _P_STR, _P_INT,
                                    _c_int, _c_int, _c_i64, _c_i64,
                                    ctypes.POINTER(_P_JOBS), _P_INT]),
    "dq_consumer_add_queue": (_c_int, [_P_CONSUMER, _c_str, _c_int]),
    "dq_consumer_job_queue": (_c_str, [_P_CONSUMER, _P_JOB]),
    # the queues of a namespace
    "dq_queues": (_c_int, [_P_CLIENT, _c_int, ctypes.POINTER(_P_QLIST)]),
    "dq_queue_list_count": (_c_size, [_P_QLIST]),
    "dq_queue_list_name": (_c_str, [_P_QLIST, _c_size]),
    "dq_queue_list_partitioned": (_c_int, [_P_QLIST, _c_size]),
    "dq_queue_list_complete": (_c_int, [_P_QLIST]),
    "dq_queue_list_free": (None, [_P_QLIST]),
    # the counts per tenant group
    "dq_group_stats": (_c_int, [_P_CLIENT, _c_str, _c_int,
                                ctypes.POINTER(_P_GLIST)]),
    "dq_group_list_count": (_c_size, [_P_GLIST]),
    "dq_group_list_name": (_c_str, [_P_GLIST, _c_size]),
    "dq_group_list_due": (_c_i64, [_P_GLIST, _c_size]),
    "dq_group_list_later": (_c_i64, [_P_GLIST, _c_size]),
    "dq_group_list_inflight": (_c_i64, [_P_GLIST, _c_size]),
    "dq_group_list_free": (None, [_P_GLIST]),
    # a polled or listed job's group and priority
    "dq_job_group": (_c_str, [_P_JOB]),
    "dq_job_priority": (_c_int, [_P_JOB]),
}


def library_path():
    """The file name or path the library is loaded from."""
    path = os.environ.get("DELAYQ_LIB")
    if path:
        return path
    return ctypes.util.find_library("delayq") or "libdelayq.so.0"


def _load():
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError("delayq: cannot load libdelayq (%s): %s; install "
                          "libdelayq or set DELAYQ_LIB" % (path, e)) from e
    for name, (res, args) in _PROTOTYPES.items():
        fn = getattr(lib, name)   # AttributeError = a library too old
        fn.restype = res
        fn.argtypes = args
    for name, (res, args) in _OPTIONAL_PROTOTYPES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = res
            fn.argtypes = args
    return lib


_lib = _load()
HAVE_LIST = hasattr(_lib, "dq_list")
HAVE_COUNTERS = hasattr(_lib, "dq_counters")
HAVE_CONSUMER = hasattr(_lib, "dq_consumer_new_sync")
HAVE_GET = hasattr(_lib, "dq_get")
HAVE_CONFIG = hasattr(_lib, "dq_config_set")
HAVE_COUNT_DUE = hasattr(_lib, "dq_count_due")
HAVE_QUEUES = hasattr(_lib, "dq_queues")
HAVE_RESCHEDULE = hasattr(_lib, "dq_reschedule_batch")
HAVE_GROUP_STATS = hasattr(_lib, "dq_group_stats")
HAVE_JOB_GROUP = hasattr(_lib, "dq_job_group")
COUNT_DUE_MAX = 64


def version():
    """Version string of the loaded library, e.g. "0.1.0"."""
    return _lib.dq_version_string().decode()


def version_number():
    """MAJOR*10000 + MINOR*100 + PATCH of the loaded library."""
    return _lib.dq_version_number()


def strerror(code):
    """Static English text of an error code."""
    return _lib.dq_strerror(code).decode()


def errname(code):
    """Name of an error code without prefix, e.g. "ESTALE"."""
    return _lib.dq_errname(code).decode()


def _error(code, message=None):
    cls = _CLASS_BY_NAME.get(errname(code), DelayqError)
    return cls(code, message)


# Error codes by name, read from the library itself.
ERRORS = {}
for _code in range(-1, -64, -1):
    _name = errname(_code)
    if _name != "UNKNOWN":
        ERRORS[_name] = _code
del _code, _name


def _enc(s, what, code_name):
    """str/bytes -> bytes for a NUL-terminated C string argument."""
    if isinstance(s, str):
        b = s.encode("utf-8", "surrogateescape")
    elif isinstance(s, (bytes, bytearray)):
        b = bytes(s)
    else:
        raise TypeError("%s must be str or bytes, not %s"
                        % (what, type(s).__name__))
    if b"\0" in b:
        raise _error(ERRORS[code_name], "%s contains a NUL byte" % what)
    return b


def _dec(b):
    return b.decode("utf-8", "surrogateescape")


def _bytes_at(fn, obj):
    """The bytes of a (pointer, length) accessor, or None for NULL."""
    n = _c_size(0)
    ptr = fn(obj, ctypes.byref(n))
    if not ptr:
        return None
    return ctypes.string_at(ptr, n.value) if n.value else b""


def _payload(p):
    if isinstance(p, str):
        return p.encode("utf-8")
    if isinstance(p, (bytes, bytearray, memoryview)):
        return bytes(p)
    raise TypeError("payload must be bytes or str, not %s"
                    % type(p).__name__)


# ---- Jobs ---------------------------------------------------------------------


class Job:
    """A job copied out of the library: plain Python values, independent of
    the C list it came from.

    id (str), payload (bytes), attempt (int, 1 on first delivery; for dead
    jobs: deliveries made), due_ms (server epoch ms; for dead jobs: time of
    death), token (str, "" if not leased), lease_deadline_ms (0 if not
    leased), queue (str), last_error (bytes: the job's last failure reason,
    from list() and dead_list(); None when none was recorded),
    failed_ms (when it was, 0 if none), group (str: its tenant group, from
    polls, consumers, list() and dead_list(); None when it has none) and
    priority (from the same; 0 when it has none).  ack()/nack()/extend() act on the job through the client
    that delivered it."""

    __slots__ = ("id", "payload", "attempt", "due_ms", "token",
                 "lease_deadline_ms", "queue", "last_error", "failed_ms",
                 "group", "priority", "_client")

    def __init__(self, client, queue, job):
        n = _c_size(0)
        ptr = _lib.dq_job_payload(job, ctypes.byref(n))
        self.id = _dec(_lib.dq_job_id(job))
        self.payload = ctypes.string_at(ptr, n.value) if n.value else b""
        self.attempt = _lib.dq_job_attempt(job)
        self.due_ms = _lib.dq_job_due_ms(job)
        self.token = _dec(_lib.dq_job_token(job))
        self.lease_deadline_ms = _lib.dq_job_lease_deadline_ms(job)
        self.last_error, self.failed_ms = None, 0
        if HAVE_GET:
            self.last_error = _bytes_at(_lib.dq_job_last_error, job)
            self.failed_ms = _lib.dq_job_failed_ms(job)
        self.group, self.priority = None, 0
        if HAVE_JOB_GROUP:   # polls and listings fill them in
            grp = _lib.dq_job_group(job)
            self.group = None if grp is None else _dec(grp)
            self.priority = _lib.dq_job_priority(job)
        self.queue = queue
        self._client = client

    def ack(self):
        """Finishes the job (see Client.ack)."""
        self._client.ack(self.queue, self.id, self.token)

    def nack(self, delay_ms=0, dead=False, reason=None):
        """Releases the job; True if it was dead-lettered (Client.nack)."""
        return self._client.nack(self.queue, self.id, self.token, delay_ms,
                                 dead, reason=reason)

    def extend(self, lease_ms):
        """Extends the lease; returns and records the new deadline."""
        self.lease_deadline_ms = self._client.extend(self.queue, self.id,
                                                     self.token, lease_ms)
        return self.lease_deadline_ms

    def __repr__(self):
        return ("Job(id=%r, attempt=%d, due_ms=%d, token=%r, payload=%r)"
                % (self.id, self.attempt, self.due_ms, self.token,
                   self.payload[:40]))


class QueueList(list):
    """The names Client.queues found (a list of str), with .partitioned,
    the set of those that have partitions, and .complete, False when the
    listing's bounds (max, or SCAN rounds per node) cut it short."""

    def __init__(self, names, partitioned, complete):
        super().__init__(names)
        self.partitioned = frozenset(
            n for n, p in zip(names, partitioned) if p)
        self.complete = complete


class JobInfo:
    """One job as Client.get() saw it, copied into plain Python values.

    id (str), queue (str), state (SCHEDULED, DUE, INFLIGHT or DEAD; a lease
    that ran out is INFLIGHT until a poll claims the job again), due_ms
    (due time; in flight: the lease deadline; dead: time of death),
    attempts (deliveries so far), lease_deadline_ms (in flight, else 0),
    payload (bytes), last_error (bytes, or None when no reason was
    recorded), failed_ms (when it was, 0 if none), now_ms (the server's
    time of the lookup), repeat (a repeating job's rule as text, e.g.
    "every 60000 ms from <start ms>" or "cron 30 9 * * 1-5 tz +330", else
    None), group (its group, else None), priority (0 none), followup_ms
    (a debounced job in flight with pushes waiting: the earliest time its
    follow-up may be due, server epoch ms; else 0)."""

    __slots__ = ("id", "queue", "state", "due_ms", "attempts",
                 "lease_deadline_ms", "payload", "last_error", "failed_ms",
                 "now_ms", "repeat", "group", "priority", "followup_ms")

    def __init__(self, queue, info):
        self.id = _dec(_lib.dq_job_info_id(info))
        self.queue = queue
        self.state = _STATES.get(_lib.dq_job_info_state(info), "unknown")
        self.due_ms = _lib.dq_job_info_due_ms(info)
        self.attempts = _lib.dq_job_info_attempts(info)
        self.lease_deadline_ms = _lib.dq_job_info_lease_deadline_ms(info)
        self.payload = _bytes_at(_lib.dq_job_info_payload, info) or b""
        self.last_error = _bytes_at(_lib.dq_job_info_last_error, info)
        self.failed_ms = _lib.dq_job_info_failed_ms(info)
        self.now_ms = _lib.dq_job_info_now_ms(info)
        rep = None
        if getattr(_lib, "dq_job_info_repeat", None) is not None:
            rep = _lib.dq_job_info_repeat(info)
        self.repeat = None if rep is None else _dec(rep)
        grp = None
        if getattr(_lib, "dq_job_info_group", None) is not None:
            grp = _lib.dq_job_info_group(info)
        self.group = None if grp is None else _dec(grp)
        self.priority = 0
        if getattr(_lib, "dq_job_info_priority", None) is not None:
            self.priority = _lib.dq_job_info_priority(info)
        fu = getattr(_lib, "dq_job_info_followup_ms", None)
        self.followup_ms = fu(info) if fu is not None else 0

    def __repr__(self):
        return ("JobInfo(id=%r, state=%r, due_ms=%d, attempts=%d, "
                "last_error=%r)" % (self.id, self.state, self.due_ms,
                                     self.attempts, self.last_error))


# ---- Client -------------------------------------------------------------------


class Client:
    """A connection to Redis.  Use as a context manager, or call close().

    Client(uri="redis://127.0.0.1:6379", *, namespace=None,
           max_attempts=None, connect_timeout_ms=None,
           command_timeout_ms=None, max_payload=None, wait_cap_ms=None,
           wait_replicas=None, wait_replicas_timeout_ms=None,
           done_ttl_ms=None, partitions=None, counters=None, lease_ms=None,
           layout=None, durable=None, username=None,
           password=None, tls_ca_file=None,
           tls_cert_file=None, tls_key_file=None, tls_server_name=None)

    Options left as None keep the library's defaults (see delayq.h).
    counters=True (DQ_OPT_COUNTERS) makes this client's polls, acks and
    nacks count deliveries, acks, retries and failures per queue in Redis,
    for counters(); give it to every producer and consumer of a queue.
    layout=LAYOUT_COMPACT or LAYOUT_COMPACT_PUSH (DQ_OPT_LAYOUT) is the
    layout of queues without a "layout" setting for this client's pushes
    and polls.
    durable=True (DQ_OPT_DURABLE, with wait_replicas=N >= 1) makes every
    write wait for N replicas: a poll hands out jobs only once their
    leases reached them, and an unconfirmed write raises
    NotEnoughReplicas."""

    def __init__(self, uri="redis://127.0.0.1:6379", **options):
        self._c = None
        self._lock = threading.RLock()
        unknown = (set(options) - set(_OPT_INT) - set(_OPT_BOOL)
                   - set(_OPT_STR))
        if unknown:
            raise TypeError("unknown option(s): %s"
                            % ", ".join(sorted(unknown)))
        opts = _lib.dq_options_new()
        if not opts:
            raise NoMemory(ERRORS["ENOMEM"])
        try:
            for key, value in options.items():
                if value is None:
                    continue
                if key in _OPT_INT:
                    if isinstance(value, bool) or not isinstance(value, int):
                        raise TypeError("%s must be an int" % key)
                    rc = _lib.dq_options_set_int(opts, _OPT_INT[key], value)
                elif key in _OPT_BOOL:
                    if not isinstance(value, int) or value not in (0, 1):
                        raise TypeError("%s must be True or False" % key)
                    rc = _lib.dq_options_set_int(opts, _OPT_BOOL[key],
                                                 int(value))
                else:
                    rc = _lib.dq_options_set_str(
                        opts, _OPT_STR[key], _enc(value, key, "EINVAL"))
                if rc < 0:
                    raise _error(rc, "option %s: %r refused (%s)"
                                 % (key, value, strerror(rc)))
            c = _P_CLIENT()
            rc = _lib.dq_open(_enc(uri, "uri", "EURI"), opts,
                              ctypes.byref(c))
        finally:
            _lib.dq_options_free(opts)
        if rc < 0:
            msg = _dec(_lib.dq_errmsg(c)) if c else None
            _lib.dq_close(c)
            raise _error(rc, msg or None)
        self._c = c

    # -- lifetime

    def close(self):
        """Closes the connection(s).  Idempotent."""
        with self._lock:
            c, self._c = self._c, None
            if c:
                _lib.dq_close(c)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self):
        return not self._c

    @property
    def warnings(self):
        """Findings about the server made at connect time ("" if none)."""
        with self._lock:
            return _dec(_lib.dq_warnings(self._handle()))

    def _handle(self):
        if not self._c:
            raise Closed(ERRORS["ECLOSED"], "the client is closed")
        return self._c

    def _check(self, rc):
        """Raises for a negative return code, with the client's message."""
        if rc < 0:
            raise _error(rc, _dec(_lib.dq_errmsg(self._c)) or None)
        return rc

    # -- producing

    def push(self, queue, payload, delay_ms=0, *, at_ms=None, id=None,
             replace=False, every_ms=None, cron=None, tz_offset_min=0,
             max_attempts=None, expire_in_ms=None, expire_at_ms=None,
             debounce=False, max_wait_ms=None, group=None, priority=None):
        """Pushes one job due delay_ms from now, or at at_ms (server epoch
        ms).  id None lets the library generate one.  replace: what to do
        when the id exists (False: keep it).  Returns (id, outcome) with
        outcome PUSHED, KEPT, REPLACED or DONE (keep mode: the id was acked
        within the done window, so nothing was written).

        Options (dq_push_ex): every_ms or cron (a 5-field cron expression
        read at tz_offset_min minutes from UTC) make a repeating job, which
        needs an id, cannot expire, and is registered once per id: each ack
        schedules its next run (missed runs run once).  max_attempts: the
        job's own; expire_in_ms / expire_at_ms: no delivery starts after
        then.  A bad option raises InvalidArgument and sends nothing.

        debounce=True (with an id, a delay, no replace, repeat or expiry):
        an unknown id is created (DEBOUNCE_CREATED); a pending one takes
        this payload and is due delay_ms from now, but never later than
        max_wait_ms after the push that created it (DEBOUNCE_MOVED); one
        that runs keeps one follow-up with the latest payload, started when
        the run is acked (DEBOUNCE_FOLLOWUP).  Never DONE.

        group: the job's group (a tenant, say: letters, digits and
        "_-.:@", at most 64 bytes); due jobs are handed out round-robin
        over the groups.  priority: 0..9 (0 the default); among due jobs
        (of one group) higher first, never before their due time."""
        q = _enc(queue, "queue", "EQUEUE")
        data = _payload(payload)
        jid = None if id is None else _enc(id, "id", "EID")
        flags = _PUSH_REPLACE if replace else _PUSH_KEEP
        if debounce:
            if replace:
                raise TypeError("give replace or debounce, not both")
            flags = _PUSH_DEBOUNCE
        elif max_wait_ms is not None:
            raise TypeError("max_wait_ms needs debounce=True")
        out = ctypes.create_string_buffer(ID_BUF)
        outcome = _c_int(0)
        if at_ms is not None and delay_ms:
            raise TypeError("give delay_ms or at_ms, not both")
        if every_ms is not None and cron is not None:
            raise TypeError("give every_ms or cron, not both")
        if expire_in_ms is not None and expire_at_ms is not None:
            raise TypeError("give expire_in_ms or expire_at_ms, not both")
        opts = [(o, v) for o, v in ((_PO_EVERY_MS, every_ms),
                                    (_PO_MAX_ATTEMPTS, max_attempts),
                                    (_PO_EXPIRE_IN_MS, expire_in_ms),
                                    (_PO_EXPIRE_AT, expire_at_ms),
                                    (_PO_DEBOUNCE_MAX_MS, max_wait_ms),
                                    (_PO_PRIORITY, priority))
                if v is not None]
        texts = [(o, t) for o, t in ((_PO_CRON, cron), (_PO_GROUP, group))
                 if t is not None]
        if texts or opts or tz_offset_min:
            return self._push_ex(q, data, jid, flags, delay_ms, at_ms, opts,
                                 texts, tz_offset_min)
        with self._lock:
            c = self._handle()
            if at_ms is not None:
                rc = _lib.dq_push_at(c, q, data, len(data), at_ms, jid,
                                     flags, out, ID_BUF,
                                     ctypes.byref(outcome))
            else:
                rc = _lib.dq_push(c, q, data, len(data), delay_ms, jid, flags,
                                  out, ID_BUF, ctypes.byref(outcome))
            self._check(rc)
        return _dec(out.value), _OUTCOMES.get(outcome.value, outcome.value)

    def _push_ex(self, q, data, jid, flags, delay_ms, at_ms, opts, texts,
                 tz_offset_min):
        """push() with options: one dq_push_opts for the call."""
        po = _lib.dq_push_opts_new()
        if not po:
            raise MemoryError("dq_push_opts_new")
        try:
            sets = [(o, int(v)) for o, v in opts]
            if tz_offset_min:
                sets.append((_PO_TZ_OFFSET_MIN, int(tz_offset_min)))
            for o, v in sets:
                if _lib.dq_push_opts_set(po, o, v) < 0:
                    raise _error(ERRORS["EINVAL"],
                                 _dec(_lib.dq_push_opts_errmsg(po)))
            for o, text in texts:
                if isinstance(text, str):
                    text = text.encode("utf-8")
                if b"\0" in text or _lib.dq_push_opts_set_str(
                        po, o, text) < 0:
                    raise _error(ERRORS["EINVAL"],
                                 _dec(_lib.dq_push_opts_errmsg(po)) or
                                 "NUL in a text option")
            out = ctypes.create_string_buffer(ID_BUF)
            outcome = _c_int(0)
            when = at_ms if at_ms is not None else delay_ms
            if at_ms is not None:
                flags |= _PUSH_AT
            with self._lock:
                self._check(_lib.dq_push_ex(
                    self._handle(), q, data, len(data), when, jid, flags, po,
                    out, ID_BUF, ctypes.byref(outcome)))
            return _dec(out.value), _OUTCOMES.get(outcome.value,
                                                  outcome.value)
        finally:
            _lib.dq_push_opts_free(po)

    def push_batch(self, queue, payloads, delays_ms=None, ids=None,
                   replace=False, debounce=False):
        """Pushes many jobs in one round trip.  payloads: a sequence of
        bytes/str; delays_ms: None or one delay per job; ids: None or one id
        (or None) per job.  debounce=True: each a debounced push as push()
        says (every id given; no max wait), an id twice applied in order.
        Returns a list of (id, outcome)."""
        if replace and debounce:
            raise TypeError("give replace or debounce, not both")
        q = _enc(queue, "queue", "EQUEUE")
        data = [_payload(p) for p in payloads]
        n = len(data)
        if n == 0:
            return []
        c_payloads = (_c_str * n)(*data)
        c_lens = (_c_size * n)(*[len(d) for d in data])
        c_delays = None
        if delays_ms is not None:
            if len(delays_ms) != n:
                raise ValueError("delays_ms has %d entries for %d payloads"
                                 % (len(delays_ms), n))
            c_delays = (_c_i64 * n)(*delays_ms)
        c_ids = None
        if ids is not None:
            if len(ids) != n:
                raise ValueError("ids has %d entries for %d payloads"
                                 % (len(ids), n))
            c_ids = (_c_str * n)(*[None if i is None else _enc(i, "id", "EID")
                                   for i in ids])
        ids_out = ctypes.create_string_buffer(n * ID_BUF)
        outcomes = (_c_int * n)()
        with self._lock:
            self._check(_lib.dq_push_batch(
                self._handle(), q, n, c_payloads, c_lens, c_delays, c_ids,
                _PUSH_DEBOUNCE if debounce else
                _PUSH_REPLACE if replace else _PUSH_KEEP, ids_out, outcomes))
        raw = ids_out.raw
        res = []
        for i in range(n):
            b = raw[i * ID_BUF:(i + 1) * ID_BUF]
            res.append((_dec(b[:b.index(b"\0")]),
                        _OUTCOMES.get(outcomes[i], outcomes[i])))
        return res

    def cancel(self, queue, id, inflight=False):
        """Cancels a job not delivered yet.  Returns CANCELED_PENDING,
        CANCEL_BUSY (in flight, left alone), CANCELED_INFLIGHT (with
        inflight=True) or 0 (no pending or in-flight job)."""
        q = _enc(queue, "queue", "EQUEUE")
        jid = _enc(id, "id", "EID")
        with self._lock:
            return self._check(_lib.dq_cancel(
                self._handle(), q, jid, _CANCEL_INFLIGHT if inflight else 0))

    def reschedule(self, queue, ids, delay_ms=None, at_ms=None,
                   revive=False):
        """Moves pending jobs (scheduled or due) to a new due time, keeping
        payload, attempts, options, repeat rule and last error (a repeating
        job moves its next run only): delay_ms from now or at_ms (epoch ms),
        on the server's clock.  ids: one id, or a list of ids (one round
        trip).  Returns the outcome, or a list of one per id: MOVED,
        UNKNOWN (no such job), INFLIGHT or DEAD (left alone), REVIVED (a
        dead job back to pending, with revive=True; attempts restart)."""
        if (delay_ms is None) == (at_ms is None):
            raise ValueError("give exactly one of delay_ms and at_ms")
        flags = _RESCHED_REVIVE if revive else 0
        if at_ms is not None:
            flags |= _RESCHED_AT
        when = at_ms if at_ms is not None else delay_ms
        return self._resched(queue, ids, when, flags)

    def promote(self, queue, ids, revive=False):
        """Makes pending jobs due now ("run now"), as reschedule(queue, ids,
        delay_ms=0, revive=revive) does."""
        return self._resched(queue, ids, 0, _RESCHED_REVIVE if revive else 0)

    def _resched(self, queue, ids, when, flags):
        """dq_reschedule_batch of one id or a list of them."""
        if not HAVE_RESCHEDULE:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "dq_reschedule")
        q = _enc(queue, "queue", "EQUEUE")
        one = isinstance(ids, (str, bytes))
        lst = [ids] if one else list(ids)
        n = len(lst)
        if n == 0:
            return []
        c_ids = (_c_str * n)(*[_enc(i, "id", "EID") for i in lst])
        out = (_c_int * n)()
        with self._lock:
            self._check(_lib.dq_reschedule_batch(self._handle(), q, n, c_ids,
                                                 int(when), flags, out))
        res = [_RESCHED_OUTCOMES.get(o, o) for o in out]
        return res[0] if one else res

    # -- consuming

    def _jobs(self, queue, ptr):
        """Copies a dq_jobs list into Job objects and frees it."""
        try:
            return [Job(self, queue, _lib.dq_jobs_at(ptr, i))
                    for i in range(_lib.dq_jobs_count(ptr))]
        finally:
            _lib.dq_jobs_free(ptr)

    def poll(self, queue, max=1, lease_ms=30000, wait_ms=None):
        """Claims up to max due jobs under a lease of lease_ms.  With
        wait_ms, waits up to that long for a job to come due (the GIL is
        released; Ctrl-C is seen at least once a second).  Returns a list
        of Job (empty if none)."""
        q = _enc(queue, "queue", "EQUEUE")
        qs = _dec(q)
        ptr = _P_JOBS()
        if wait_ms is None:
            with self._lock:
                self._check(_lib.dq_poll(self._handle(), q, max, lease_ms,
                                         ctypes.byref(ptr), None))
            return self._jobs(qs, ptr)
        if wait_ms < 0 or wait_ms > DELAY_MAX:
            raise InvalidArgument(ERRORS["EDELAY"], "wait_ms is %d; it must "
                                  "be 0..%d" % (wait_ms, DELAY_MAX))
        deadline = time.monotonic() + wait_ms / 1000.0
        while True:
            left = int((deadline - time.monotonic()) * 1000)
            with self._lock:
                rc = self._check(_lib.dq_poll_wait(
                    self._handle(), q, max, lease_ms,
                    min(_WAIT_SLICE_MS, left if left > 0 else 0),
                    ctypes.byref(ptr)))
            if rc > 0 or left <= _WAIT_SLICE_MS:
                return self._jobs(qs, ptr)

    def poll_wait_multi(self, queues, weights=None, strict=False, max=1,
                        lease_ms=30000, wait_ms=0):
        """Waits up to wait_ms for due jobs of any of the queues (a list
        of 1..MULTI_MAX names, none twice) and claims up to max of ONE of
        them: with strict=True the first queue in list order that has due
        work, else one drawn among those with due work in proportion to
        weights (a list of ints 1..WEIGHT_MAX, default all 1).  Idle
        queues are not polled beyond once per idle cap; one connection
        waits for all of them (the GIL is released; Ctrl-C is seen at least
        once a second).  Returns (index, jobs): the index in queues of the
        queue the jobs came from and a list of Job (whose .queue is that
        queue), or (None, []) when nothing came due in time."""
        queues = list(queues)
        n = len(queues)
        names = [_enc(q, "queue", "EQUEUE") for q in queues]
        qarr = (_c_str * n)(*names) if n else None
        warr = None
        if weights is not None:
            weights = list(weights)
            if len(weights) != n:
                raise InvalidArgument(ERRORS["EINVAL"], "%d weights for %d "
                                      "queues" % (len(weights), n))
            warr = (_c_int * n)(*weights)
        if wait_ms < 0 or wait_ms > DELAY_MAX:
            raise InvalidArgument(ERRORS["EDELAY"], "wait_ms is %d; it must "
                                  "be 0..%d" % (wait_ms, DELAY_MAX))
        mode = _PRIO_STRICT if strict else _PRIO_WEIGHTED
        ptr = _P_JOBS()
        qi = _c_int(-1)
        deadline = time.monotonic() + wait_ms / 1000.0
        while True:
            left = int((deadline - time.monotonic()) * 1000)
            with self._lock:
                rc = self._check(_lib.dq_poll_wait_multi(
                    self._handle(), n, qarr, warr, mode, max, lease_ms,
                    min(_WAIT_SLICE_MS, left if left > 0 else 0),
                    ctypes.byref(ptr), ctypes.byref(qi)))
            if rc > 0:
                i = qi.value
                return i, self._jobs(_dec(names[i]), ptr)
            if left <= _WAIT_SLICE_MS:
                return None, self._jobs(None, ptr)

    def next_due_ms(self, queue):
        """Polls nothing: ms until the next job is due (0 = now, -1 =
        nothing pending), as stats() reports it."""
        return self.stats(queue)["next_due_ms"]

    def ack(self, queue, id, token):
        """Finishes a job you hold.  Raises StaleToken or NotFound."""
        q, jid, tok = (_enc(queue, "queue", "EQUEUE"), _enc(id, "id", "EID"),
                       _enc(token, "token", "EINVAL"))
        with self._lock:
            self._check(_lib.dq_ack(self._handle(), q, jid, tok))

    def ack_batch(self, queue, jobs):
        """Acks many jobs in one round trip.  jobs: Job objects or (id,
        token) pairs.  Returns one result per job: 0 acked, or the
        DelayqError class (StaleToken / NotFound) for those that were not."""
        q = _enc(queue, "queue", "EQUEUE")
        pairs = [(j.id, j.token) if isinstance(j, Job) else tuple(j)
                 for j in jobs]
        n = len(pairs)
        if n == 0:
            return []
        ids = (_c_str * n)(*[_enc(i, "id", "EID") for i, _ in pairs])
        toks = (_c_str * n)(*[_enc(t, "token", "EINVAL") for _, t in pairs])
        results = (_c_int * n)()
        with self._lock:
            self._check(_lib.dq_ack_batch(self._handle(), q, n, ids, toks,
                                          results))
        return [0 if r == 0 else _CLASS_BY_NAME.get(errname(r), DelayqError)
                for r in results]

    def nack(self, queue, id, token, delay_ms=0, dead=False, reason=None):
        """Releases a job you hold: due again after delay_ms, or dead-
        lettered (dead=True, or max_attempts reached).  reason (bytes or
        str, at most REASON_MAX bytes: longer raises InvalidArgument and
        changes nothing) is recorded as the job's last failure reason;
        None records none and leaves the last one.  Returns True if it was
        dead-lettered."""
        q, jid, tok = (_enc(queue, "queue", "EQUEUE"), _enc(id, "id", "EID"),
                       _enc(token, "token", "EINVAL"))
        flags = _NACK_DEAD if dead else 0
        if reason is None:
            with self._lock:
                return self._check(_lib.dq_nack(
                    self._handle(), q, jid, tok, delay_ms, flags)) == 1
        if not HAVE_GET:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "dq_nack_reason")
        why = _payload(reason)
        with self._lock:
            return self._check(_lib.dq_nack_reason(
                self._handle(), q, jid, tok, delay_ms, flags, why,
                len(why))) == 1

    def get(self, queue, id):
        """Looks a job up by id (one round trip, read-only): a JobInfo, or
        None when there is no pending, in-flight or dead job with that
        id."""
        if not HAVE_GET:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "dq_get")
        q, jid = _enc(queue, "queue", "EQUEUE"), _enc(id, "id", "EID")
        info = _P_INFO()
        with self._lock:
            rc = self._check(_lib.dq_get(self._handle(), q, jid,
                                         ctypes.byref(info)))
        if rc == 0:
            return None
        try:
            return JobInfo(_dec(q), info)
        finally:
            _lib.dq_job_info_free(info)

    def extend(self, queue, id, token, lease_ms):
        """Sets the lease of a job you hold to lease_ms from now; returns
        the new deadline (server epoch ms)."""
        q, jid, tok = (_enc(queue, "queue", "EQUEUE"), _enc(id, "id", "EID"),
                       _enc(token, "token", "EINVAL"))
        deadline = _c_i64(0)
        with self._lock:
            self._check(_lib.dq_extend(self._handle(), q, jid, tok, lease_ms,
                                       ctypes.byref(deadline)))
        return deadline.value

    # -- dead letters, listing, stats

    def dead_list(self, queue, offset=0, count=100):
        """Dead jobs, oldest first (attempt = deliveries made, due_ms =
        time of death)."""
        q = _enc(queue, "queue", "EQUEUE")
        ptr = _P_JOBS()
        with self._lock:
            self._check(_lib.dq_dead_list(self._handle(), q, offset, count,
                                          ctypes.byref(ptr)))
        return self._jobs(_dec(q), ptr)

    def dead_requeue(self, queue, id=None, delay_ms=0):
        """Moves dead jobs back to pending: id, or id=None for every dead
        job (in batches of 1000).  Returns the number requeued."""
        return self._dead_change(queue, id, lambda c, q, i: _lib.
                                 dq_dead_requeue(c, q, i, delay_ms))

    def dead_purge(self, queue, id=None):
        """Deletes dead jobs: id, or id=None for every dead job.  Returns
        the number deleted."""
        return self._dead_change(queue, id, _lib.dq_dead_purge)

    def _dead_change(self, queue, id, fn):
        q = _enc(queue, "queue", "EQUEUE")
        if id is not None:
            with self._lock:
                return self._check(fn(self._handle(), q,
                                      _enc(id, "id", "EID")))
        total = 0
        # Bounded by the count at the start: jobs that keep dying while we
        # requeue cannot keep us looping.
        for _ in range(self.stats(queue)["dead"] // 1000 + 2):
            with self._lock:
                n = self._check(fn(self._handle(), q, None))
            if n == 0:
                break
            total += n
        return total

    def list(self, queue, which=LIST_SCHEDULED, offset=0, count=100):
        """Jobs of a queue in one state (LIST_SCHEDULED, LIST_INFLIGHT,
        LIST_DEAD), in time order.  Needs a library with dq_list."""
        if not HAVE_LIST:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "dq_list")
        q = _enc(queue, "queue", "EQUEUE")
        ptr = _P_JOBS()
        with self._lock:
            self._check(_lib.dq_list(self._handle(), q, which, offset, count,
                                     ctypes.byref(ptr), None))
        return self._jobs(_dec(q), ptr)

    def stats(self, queue):
        """Counts of a queue read atomically: dict with scheduled, due,
        inflight, dead and next_due_ms (-1 if nothing is pending)."""
        q = _enc(queue, "queue", "EQUEUE")
        v = [_c_i64(0) for _ in range(5)]
        with self._lock:
            self._check(_lib.dq_stats(self._handle(), q,
                                      *[ctypes.byref(x) for x in v]))
        return dict(zip(("scheduled", "due", "inflight", "dead",
                         "next_due_ms"), (x.value for x in v)))

    def queues(self, max=QUEUES_MAX):
        """The queues of the client's namespace, on every node (every
        primary of a cluster): a QueueList of names, sorted, a partitioned
        queue once.  Needs a library with dq_queues."""
        if not HAVE_QUEUES:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "dq_queues")
        ptr = _P_QLIST()
        with self._lock:
            self._check(_lib.dq_queues(self._handle(), max,
                                       ctypes.byref(ptr)))
        try:
            n = _lib.dq_queue_list_count(ptr)
            return QueueList(
                [_dec(_lib.dq_queue_list_name(ptr, i)) for i in range(n)],
                [bool(_lib.dq_queue_list_partitioned(ptr, i))
                 for i in range(n)],
                bool(_lib.dq_queue_list_complete(ptr)))
        finally:
            _lib.dq_queue_list_free(ptr)

    def group_stats(self, queue, max=20):
        """The counts of a queue's tenant groups (dq_group_stats): a list
        of dicts {group, due, later, inflight}, the first max groups
        (1..GROUP_STATS_MAX) in turn order; group "" is the jobs pushed
        without one (inflight 0: not counted by group); then, up to max
        in all, the groups whose every job is in flight.  Needs a library
        with dq_group_stats."""
        if not HAVE_GROUP_STATS:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "dq_group_stats")
        q = _enc(queue, "queue", "EQUEUE")
        ptr = _P_GLIST()
        with self._lock:
            self._check(_lib.dq_group_stats(self._handle(), q, max,
                                            ctypes.byref(ptr)))
        try:
            return [{"group": _dec(_lib.dq_group_list_name(ptr, i)),
                     "due": _lib.dq_group_list_due(ptr, i),
                     "later": _lib.dq_group_list_later(ptr, i),
                     "inflight": _lib.dq_group_list_inflight(ptr, i)}
                    for i in range(_lib.dq_group_list_count(ptr))]
        finally:
            _lib.dq_group_list_free(ptr)

    def counters(self, queue):
        """Totals of a queue kept by the clients with counters=True
        (DQ_OPT_COUNTERS), summed over partitions: dict with delivered,
        acked, retried and failed (all 0 while no client counts).  Needs a
        library with dq_counters."""
        if not HAVE_COUNTERS:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "dq_counters")
        q = _enc(queue, "queue", "EQUEUE")
        v = [_c_i64(0) for _ in range(4)]
        with self._lock:
            self._check(_lib.dq_counters(self._handle(), q,
                                         *[ctypes.byref(x) for x in v]))
        return dict(zip(("delivered", "acked", "retried", "failed"),
                        (x.value for x in v)))

    def count_due(self, queue, bounds_ms):
        """The pending jobs of queue per due-time window, counted in Redis
        without reading them (dq_count_due): bounds_ms is a sequence of 1..
        COUNT_DUE_MAX increasing offsets from the server's now (ms).
        Returns (now_ms, counts) with len(bounds_ms) + 1 counts: due at or
        before now + bounds_ms[0], then in each window (bounds_ms[i-1],
        bounds_ms[i]], then after the last bound.  Needs a library with
        dq_count_due."""
        if not HAVE_COUNT_DUE:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "dq_count_due")
        q = _enc(queue, "queue", "EQUEUE")
        bounds = list(bounds_ms)
        n = len(bounds)
        c_bounds = (_c_i64 * max(n, 1))(*bounds)
        counts = (_c_i64 * (n + 1))()
        now = _c_i64(0)
        with self._lock:
            self._check(_lib.dq_count_due(self._handle(), q, c_bounds, n,
                                          counts, ctypes.byref(now)))
        return now.value, list(counts)

    # -- queue settings

    def config_set(self, queue, **settings):
        """Sets settings of queue (stored in Redis: every client and
        consumer of the queue follows them) in one atomic step, by the
        names of dq_setting_name: max_attempts, lease_ms, backoff ("fixed",
        "exponential" or BACKOFF_*), backoff_base_ms, backoff_cap_ms,
        backoff_jitter, dead_max, dead_ttl_ms, expired ("dead", "drop" or
        EXPIRED_*), rate_max, rate_window_ms.  None unsets one.  rate_max
        and rate_window_ms go together (InvalidArgument, nothing changed).
        config_set(q, **config_get(q)) writes back what was read.  Needs a
        library with dq_config_set."""
        names, values = self._settings(settings)
        if not names:
            raise TypeError("config_set: no settings given")
        for name, v in zip(list(settings), values):
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError("%s must be an int or None" % name)
        q = _enc(queue, "queue", "EQUEUE")
        n = len(names)
        c_names = (_c_int * n)(*names)
        c_vals = (_c_i64 * n)(*[_UNSET if v is None else v for v in values])
        with self._lock:
            self._check(_lib.dq_config_set(self._handle(), q, n, c_names,
                                           c_vals))

    def config_get(self, queue):
        """All settings of queue: a dict of name -> int, None for a setting
        not set (the client's option or the default holds).  backoff and
        expired are BACKOFF_* and EXPIRED_* numbers.  Needs a library with
        dq_config_get."""
        self._settings({})
        q = _enc(queue, "queue", "EQUEUE")
        c_names = (_c_int * _SET_COUNT)(*range(1, _SET_COUNT + 1))
        c_vals = (_c_i64 * _SET_COUNT)()
        with self._lock:
            self._check(_lib.dq_config_get(self._handle(), q, _SET_COUNT,
                                           c_names, c_vals))
        return {_dec(_lib.dq_setting_name(i + 1)):
                (None if c_vals[i] == _UNSET else c_vals[i])
                for i in range(_SET_COUNT)}

    @staticmethod
    def _settings(settings):
        """The DQ_SET_* numbers and the values (words turned to numbers)
        of keyword settings; TypeError for an unknown name."""
        if not HAVE_CONFIG:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "queue settings (dq_config_set)")
        names, values, unknown = [], [], []
        for name, v in settings.items():
            s = _lib.dq_setting_by_name(name.encode())
            if s < 0:
                unknown.append(name)
                continue
            if isinstance(v, str) and name in _SET_WORDS:
                if v not in _SET_WORDS[name]:
                    raise InvalidArgument(
                        ERRORS["EINVAL"], "%s: %r is not one of %s" %
                        (name, v, ", ".join(sorted(_SET_WORDS[name]))))
                v = _SET_WORDS[name][v]
            names.append(s)
            values.append(v)
        if unknown:
            raise TypeError("unknown setting(s): %s"
                            % ", ".join(sorted(unknown)))
        return names, values

    def consumer(self, queue, handler, **options):
        """A Consumer of queue on this client (see Consumer)."""
        return Consumer(self, queue, handler, **options)


# ---- Consumer (delayq-consumer.h) ------------------------------------------


class Consumer:
    """The library's sync consumer loop, with a Python handler.

    Consumer(client, queue, handler, *, concurrency=None, lease_ms=None,
             retry_backoff=None ("fixed" | "exponential"),
             retry_base_ms=None, retry_max_ms=None, retry_jitter=None,
             max_attempts=None, on_outcome=None, strict=None)

    Several queues: add_queue(name, weight=1) before run(); each claim
    takes jobs of one queue, drawn by weight among those with due work,
    or with strict=True from the first one (in the order added, queue
    first) that has some.  job.queue says which queue a job is of.

    handler(job) is called for every job (a Job; do not ack it yourself).
    Its result decides: None or True -> acked (JOB_OK); False -> retried
    after the backoff (JOB_RETRY), dead-lettered after max_attempts; or
    return JOB_OK / JOB_RETRY / JOB_FAIL (dead-letter now).  An exception
    counts as JOB_RETRY and is kept in .errors (the last 100).
    on_outcome(job_id, outcome, status) is called after each job was
    finished in Redis (status 0, or a negative code such as -16 ESTALE).

    run() blocks until interrupt() (from a handler or another thread) or
    Ctrl-C, then stops gracefully and returns the number of claimed jobs it
    released.  The loop runs in a helper thread so that Ctrl-C reaches the
    main thread; handlers are called from that helper thread.  While it
    runs, the loop holds the client: use another Client for other work."""

    def __init__(self, client, queue, handler, **options):
        if not HAVE_CONSUMER:
            raise NotSupported(ERRORS["ENOTSUP"], "this libdelayq has no "
                               "consumer (delayq-consumer.h)")
        self._c = None
        self._multi = False
        self._client = client
        self.queue = _dec(_enc(queue, "queue", "EQUEUE"))
        self._handler = handler
        self._on_outcome = options.pop("on_outcome", None)
        self.errors = []
        # Keep the C callbacks alive as long as the consumer.
        self._handler_cb = _HANDLER_FN(self._call_handler)
        self._outcome_cb = _OUTCOME_CB(self._call_outcome)
        backoff = options.pop("retry_backoff", None)
        strict = options.pop("strict", None)
        unknown = set(options) - set(_COPT)
        if unknown:
            raise TypeError("unknown option(s): %s"
                            % ", ".join(sorted(unknown)))
        if backoff is not None and backoff not in _BACKOFF:
            raise ValueError("retry_backoff must be 'fixed' or "
                             "'exponential'")
        c = _P_CONSUMER()
        with client._lock:
            rc = _lib.dq_consumer_new_sync(
                client._handle(), _enc(queue, "queue", "EQUEUE"),
                self._handler_cb, None, ctypes.byref(c))
            if rc < 0:
                raise _error(rc, _dec(_lib.dq_errmsg(client._c)) or None)
        self._c = c
        try:
            sets = [(_COPT[k], v) for k, v in options.items()
                    if v is not None]
            if backoff is not None:
                sets.append((_COPT_RETRY_BACKOFF, _BACKOFF[backoff]))
            if strict is not None:
                sets.append((_COPT_PRIORITY,
                             _PRIO_STRICT if strict else _PRIO_WEIGHTED))
            for opt, value in sets:
                rc = _lib.dq_consumer_set_int(c, opt, value)
                if rc < 0:
                    raise _error(rc, "consumer option %d: %r refused"
                                 % (opt, value))
            if self._on_outcome is not None:
                _lib.dq_consumer_set_outcome_cb(c, self._outcome_cb, None)
        except BaseException:
            self.close()
            raise

    def _call_handler(self, c, jobp, userdata):
        # Never let an exception out of a ctypes callback: ctypes would
        # print it and return 0, which means DQ_JOB_ASYNC to the library.
        try:
            q = _lib.dq_consumer_job_queue(c, jobp) if self._multi else None
            r = self._handler(Job(self._client,
                                  _dec(q) if q else self.queue, jobp))
            if r is None or r is True:
                return JOB_OK
            if r is False:
                return JOB_RETRY
            if r in (JOB_OK, JOB_RETRY, JOB_FAIL):
                return r
            return JOB_RETRY
        except BaseException as e:  # noqa: B902 - see above
            self.errors = (self.errors + [e])[-100:]
            return JOB_RETRY

    def _call_outcome(self, c, jobp, outcome, status, userdata):
        try:
            self._on_outcome(_dec(_lib.dq_job_id(jobp)), outcome, status)
        except BaseException as e:  # noqa: B902
            self.errors = (self.errors + [e])[-100:]

    def add_queue(self, queue, weight=1):
        """Serves queue too (before run()), with weight 1..WEIGHT_MAX;
        a queue served already gets the new weight.  Returns its index
        (the first queue is 0)."""
        rc = _lib.dq_consumer_add_queue(self._live(),
                                        _enc(queue, "queue", "EQUEUE"),
                                        weight)
        if rc < 0:
            raise _error(rc, _dec(_lib.dq_consumer_errmsg(self._c)) or None)
        self._multi = True
        return rc

    def backoff_ms(self, attempt):
        """The retry delay the consumer gives a job at this attempt."""
        return _lib.dq_consumer_backoff_ms(self._live(), attempt)

    @property
    def errmsg(self):
        """The consumer's last error from Redis ("" if none)."""
        return _dec(_lib.dq_consumer_errmsg(self._live()))

    def _live(self):
        if not self._c:
            raise Closed(ERRORS["ECLOSED"], "the consumer is closed")
        return self._c

    def run(self):
        """Runs the loop until interrupt() or Ctrl-C; returns the number of
        claimed jobs released at the stop."""
        c = self._live()
        result = {}

        def loop():
            with self._client._lock:
                result["rc"] = _lib.dq_consumer_run(c)
        t = threading.Thread(target=loop, name="delayq-consumer",
                             daemon=True)
        t.start()
        try:
            while t.is_alive():
                t.join(0.1)
        except KeyboardInterrupt:
            self.interrupt()
            t.join()
        rc = result.get("rc", 0)
        if rc < 0:
            raise _error(rc, self.errmsg or None)
        return rc

    def interrupt(self):
        """Asks run() to stop (thread-safe; only sets a flag)."""
        if self._c:
            _lib.dq_consumer_interrupt(self._c)

    def close(self):
        """Frees the consumer (after run() returned).  Idempotent."""
        c, self._c = self._c, None
        if c:
            _lib.dq_consumer_free(c)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
