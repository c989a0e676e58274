"""Reading .npz feeds safely: never unpickled, one-line errors for a missing or malformed file.
(Its own module so loading and feeds, which import each other's users, both use it.)"""

from __future__ import annotations

import os
import zipfile
import zlib

import numpy as np

from migx_explore.compiler.errors import MigxError


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Arrays of an .npz file (never unpickled), with one-line errors for a missing or bad file."""
    where = str(path)
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            raise MigxError(f"inputs file {where!r} holds one array (.npy); write an .npz keyed by input name")
        with loaded as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise MigxError(f"inputs file {where!r} not found") from None
    except IsADirectoryError:
        raise MigxError(f"inputs file {where!r} is a folder, not an .npz file") from None
    except ValueError as e:
        # numpy reports any non-npz file as "pickled data" and advises allow_pickle=True: never do that
        why = "numpy could read it only by unpickling, which migx-explore never does" if "pickle" in str(e) else e
        raise MigxError(
            f"cannot read inputs file {where!r}: not an .npz of arrays ({why}); write one with "
            "numpy.savez(path, name=array, ...)"
        ) from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise MigxError(f"cannot read inputs file {where!r} as .npz: {e}") from None
