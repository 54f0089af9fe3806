"""icefloe: a distributed in-memory Apache Arrow cache that feeds ML training jobs.

A head plans Iceberg tables onto data nodes that hold them in RAM as Arrow
record batches; training processes stream their share of every epoch straight
from the data nodes over Arrow Flight.
"""

from ._epoch_plan import EpochPlan
from ._mixture import Mixture
from .client import Client
from .errors import (
    AlreadyExists,
    Busy,
    Cancelled,
    DataUnavailable,
    Error,
    InvalidArgument,
    NotFound,
    NotImplementedByServer,
    OutOfMemory,
    ProtocolError,
    RowsNotHeld,
    ServerError,
    StorageError,
    StreamBroken,
    Timeout,
    Unauthenticated,
    Unauthorized,
    Unavailable,
)
from .local import LocalCluster

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
    "Busy",
    "Cancelled",
    "Client",
    "DataUnavailable",
    "EpochPlan",
    "Error",
    "InvalidArgument",
    "LocalCluster",
    "Mixture",
    "NotFound",
    "NotImplementedByServer",
    "OutOfMemory",
    "ProtocolError",
    "RowsNotHeld",
    "ServerError",
    "StorageError",
    "StreamBroken",
    "Timeout",
    "Unauthenticated",
    "Unauthorized",
    "Unavailable",
    "__version__",
]
