"""Reading .npz feeds safely: never unpickled, one-line errors for a missing or malformed file.
(Its own module so loading and feeds, which import each other's users, both use it.)"""

from __future__ import annotations

import os
import stat
import tokenize
import zipfile
import zlib

import numpy as np

from migx_explore.compiler.errors import MigxError


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Arrays of an .npz file (never unpickled), with one-line errors for a missing or bad file."""
    where = str(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise MigxError(f"inputs file {where!r} not found") from None
    except OSError as e:  # a symlink loop, a name too long, no permission
        raise MigxError(f"cannot read inputs file {where!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise MigxError(f"inputs file {where!r} is a folder, not an .npz file")
    if not stat.S_ISREG(mode):  # a FIFO or device would block the read forever or never end
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a special file"
        raise MigxError(f"inputs file {where!r} is {kind}; it must be a regular .npz file")
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
    except MigxError:
        raise
    except (
        SyntaxError,
        tokenize.TokenError,
        RecursionError,
        MemoryError,
        TypeError,
        KeyError,
        IndexError,
        OverflowError,
    ) as e:
        # a garbage .npy header reaches numpy's header parser (ast / tokenize), which raises these
        raise MigxError(
            f"cannot read inputs file {where!r}: a member has a malformed .npy header ({type(e).__name__})"
        ) from None
