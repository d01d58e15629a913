"""CurveZMQ keys of a run (buffer.curve, on by default), and the address that says where they are.

Layout (ZeroMQ certificate files, as written by `zmq.auth.create_certificates`):
    keys/server.key, keys/server.key_secret         the buffer server's key pair
    keys/clients/client.key, client.key_secret      the key pair every actor uses
Folders are 0700 and files 0600. The server only accepts clients whose public key is in
keys/clients/ (ZAP authentication), so another user of a shared node or cluster can neither read
nor inject groups. The launcher makes RUN_DIR/keys at bring-up unless it exists (a resumed run
reuses it); a server started without a keys folder makes throwaway keys in a private temporary
folder and removes them when it closes.

The server publishes its address with the keys folder: `tcp://HOST:PORT?curve=/run/dir/keys`.
Only the folder's path travels (in Ray calls and logs), never a key; a client reads the keys
from that folder, so every actor must see it: same machine, or a path every node shares.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import quote, unquote

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

_CURVE = "?curve="


def keys_dir_of(run_dir: str | Path) -> Path:
    return Path(run_dir) / "keys"


def generate_keys(keys_dir: str | Path, force: bool = False) -> Path:
    """Create the server and client key pairs in `keys_dir` (refuses to overwrite unless force)."""
    if not zmq.has("curve"):
        raise RuntimeError(
            "this libzmq has no CURVE support; install pyzmq wheels (they bundle it)"
        )
    keys_dir = Path(keys_dir)
    if (keys_dir / "server.key_secret").exists() and not force:
        raise FileExistsError(
            f"{keys_dir} already holds keys; running actors use them. Pass --force to replace them"
        )
    clients = keys_dir / "clients"
    old_umask = os.umask(0o077)  # no moment where a secret is readable by others
    try:
        clients.mkdir(parents=True, exist_ok=True)
        zmq.auth.create_certificates(str(keys_dir), "server")
        zmq.auth.create_certificates(str(clients), "client")
    finally:
        os.umask(old_umask)
    for folder in (keys_dir, clients):
        os.chmod(folder, 0o700)
    for name in ("server.key", "server.key_secret"):
        os.chmod(keys_dir / name, 0o600)
    for name in ("client.key", "client.key_secret"):
        os.chmod(clients / name, 0o600)
    return keys_dir


def ensure_keys(keys_dir: str | Path) -> tuple[Path, bool]:
    """The keys in `keys_dir`, made there unless present: (folder, True if made now)."""
    keys_dir = Path(keys_dir)
    if (keys_dir / "server.key_secret").is_file():
        return keys_dir, False
    return generate_keys(keys_dir), True


def throwaway_keys() -> Path:
    """Fresh keys in a new private temporary folder (0700); the caller removes it."""
    return generate_keys(Path(tempfile.mkdtemp(prefix="microcoder-buffer-keys-")))


def with_keys(endpoint: str, keys_dir: str | Path | None) -> str:
    """The address a client connects to: the ZeroMQ endpoint plus where its keys are."""
    if keys_dir is None:
        return endpoint
    return endpoint + _CURVE + quote(str(keys_dir), safe="/")


def split_address(address: str) -> tuple[str, Path | None]:
    """(ZeroMQ endpoint, keys folder or None) of an address made by `with_keys`."""
    endpoint, sep, keys = address.partition(_CURVE)
    return endpoint, (Path(unquote(keys)) if sep else None)


def _load(path: Path) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise FileNotFoundError(
            f"CurveZMQ key {path} is missing: the launcher writes RUN_DIR/keys at bring-up "
            "(`microcoder keys RUN_DIR` does too); on several nodes put buffer.keys_dir on a "
            "path every node shares. buffer.curve = false turns keys off (anyone can connect)"
        )
    return zmq.auth.load_certificate(str(path))


def secure_server(ctx: zmq.Context, sock: zmq.Socket, keys_dir: str | Path) -> ThreadAuthenticator:
    """Make `sock` a CURVE server that admits only keys in keys_dir/clients (call before bind)."""
    keys_dir = Path(keys_dir)
    public, secret = _load(keys_dir / "server.key_secret")
    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve(domain="*", location=str(keys_dir / "clients"))
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_server = True
    return auth


def secure_client(sock: zmq.Socket, keys_dir: str | Path) -> None:
    """Make `sock` a CURVE client of the server whose keys live in keys_dir (before connect)."""
    keys_dir = Path(keys_dir)
    public, secret = _load(keys_dir / "clients" / "client.key_secret")
    server_public, _ = _load(keys_dir / "server.key")
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_serverkey = server_public
