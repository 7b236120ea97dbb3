"""Imports the CUDA kernel families; each builds its own extension from csrc/ and registers the
ops it accelerates with ftcompile.ops.cuda.register. A family that fails to build is skipped
with a warning (its ops run the reference algorithm on the GPU)."""
import importlib
import warnings

for _family in ("ftcompile.ops.cuda_gemm", "ftcompile.ops.cuda_attention"):
    try:
        importlib.import_module(_family)
    except ModuleNotFoundError as exc:
        if exc.name != _family:
            raise
    except Exception as exc:  # compile errors: keep the model running on the reference ops
        warnings.warn(f"ftcompile: {_family} unavailable ({exc}); using the reference op")
