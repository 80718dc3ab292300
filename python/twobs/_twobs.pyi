"""Type stubs of the extension module (python/src/lib.rs)."""

from typing import Any, Optional, Sequence

import numpy as np

BUILT_IN: list[str]
MPI: bool

class Error(Exception): ...
class SpecError(Error): ...
class InputError(Error): ...

class Problem:
    def __init__(self, spec: str, snippet: Optional[str] = None) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def output(self) -> str: ...
    @property
    def params(self) -> list[tuple[str, str, str, str]]: ...
    @property
    def dtypes(self) -> list[str]: ...
    @property
    def dims_from_input(self) -> bool: ...
    @property
    def sets(self) -> str: ...

class Session:
    def __init__(
        self,
        backend: str = "auto",
        gpus: Optional[Sequence[int]] = None,
        threads: int = 0,
        streams: int = 2,
        index: str = "auto",
        verify: bool = False,
        progress: bool = False,
        comm: Optional[tuple[int, int, int, str]] = None,
    ) -> None: ...
    @property
    def backend(self) -> str: ...
    @property
    def rank(self) -> tuple[int, int]: ...
    def run(
        self,
        problem: Problem,
        a: np.ndarray | Sequence[np.ndarray],
        b: np.ndarray | Sequence[np.ndarray] | None = None,
        params: Sequence[str] = ...,
        weights: Sequence[np.ndarray] = ...,
        log_bins: bool = False,
        outside_box: Optional[str] = None,
        f64: bool = False,
        ids: Sequence[tuple[str, Sequence[np.ndarray]]] = ...,
        exclude_same: Optional[str] = None,
    ) -> dict[str, Any]: ...
    def run_on_gpu(
        self,
        problem: Problem,
        a: tuple[int, tuple[int, int], str, Optional[tuple[int, int]], Optional[int]],
        b: Optional[tuple[int, tuple[int, int], str, Optional[tuple[int, int]], Optional[int]]] = None,
        params: Sequence[str] = ...,
        log_bins: bool = False,
    ) -> dict[str, Any]: ...

class GpuArray:
    """An array twobs left in a GPU's memory, read in place through ``__cuda_array_interface__``."""
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...
    @property
    def device(self) -> int: ...
    @property
    def shape(self) -> tuple[int, int]: ...

def built_in_file(name: str) -> str: ...
def programs() -> int: ...
def stop() -> None: ...
