"""CurveZMQ keys for a run: generated once into RUN_DIR/keys, used by the server and every client.

Layout (ZeroMQ certificate files, as written by `zmq.auth.create_certificates`):
    keys/server.key, keys/server.key_secret         the buffer server's key pair
    keys/clients/client.key, client.key_secret      the key pair every actor uses
The server only accepts clients whose public key is in keys/clients/ (ZAP authentication), so
another user of a shared cluster can neither read nor inject groups. Copy the folder to every
node (or keep the run directory on a shared file system).
"""

from __future__ import annotations

import os
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator


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
    clients.mkdir(parents=True, exist_ok=True)
    os.chmod(keys_dir, 0o700)
    zmq.auth.create_certificates(str(keys_dir), "server")
    zmq.auth.create_certificates(str(clients), "client")
    for secret in (keys_dir / "server.key_secret", clients / "client.key_secret"):
        os.chmod(secret, 0o600)
    return keys_dir


def _load(path: Path) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise FileNotFoundError(
            f"CurveZMQ key {path} is missing; create keys with `microcoder keys RUN_DIR` "
            "or set buffer.curve = false"
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
