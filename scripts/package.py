#!/usr/bin/env python3
"""Writes the release archives of scripts/release, with nothing but the Python standard library.

    package.py tar OUT.tar.gz DIR [--level N]   DIR as OUT.tar.gz, DIR's name as the top directory
    package.py image OUT.oci.tar --binary BIN --version V [--revision R]
                                                the container image archive (OCI layout + docker
                                                manifest.json in one tar, see docs/packaging.md)
    package.py rootfs DEST --binary BIN         the image's root filesystem as a directory (the
                                                Dockerfile's build stage; needs root for owners)
    package.py sha256 FILE...                   FILE.sha256 beside each FILE, naming it only

Every archive is reproducible: sorted entries, owner 0:0 (65532 where the image says so), times
from SOURCE_DATE_EPOCH (default 0), no gzip name or time. The image's root filesystem is the
gateway binary, exactly the shared libraries `ldd` lists for it, the CA bundle, /etc/passwd and
/etc/group with the non-root user, and the empty /config, /state and /tmp.
"""

import gzip
import hashlib
import io
import json
import os
import re
import stat
import subprocess
import sys
import tarfile
import time

# The image's user: not root, the usual "nonroot" id of minimal images.
IMAGE_UID = 65532
IMAGE_USER = "botgw"
GATEWAY_PATH = "usr/local/bin/bot-gateway"
CONFIG_PATH = "/config/config.json"
STATE_DIR = "/state"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PORTS = (8081, 8082)


def epoch():
    return int(os.environ.get("SOURCE_DATE_EPOCH", "0"))


def die(msg):
    print(f"package.py: {msg}", file=sys.stderr)
    sys.exit(1)


# --- one entry of an archive ---------------------------------------------------------------

class Entry:
    """A file, directory or symlink to put into an archive: where, what, whose, which mode."""

    def __init__(self, path, kind, mode, uid=0, data=b"", link=""):
        self.path, self.kind, self.mode, self.uid, self.data, self.link = path, kind, mode, uid, data, link

    def tarinfo(self):
        info = tarfile.TarInfo(self.path)
        info.mode = self.mode
        info.uid = info.gid = self.uid
        info.uname = info.gname = ""
        info.mtime = epoch()
        if self.kind == "dir":
            info.type = tarfile.DIRTYPE
        elif self.kind == "link":
            info.type = tarfile.SYMTYPE
            info.linkname = self.link
        else:
            info.size = len(self.data)
        return info


def write_tar(fileobj, entries):
    with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in sorted(entries, key=lambda e: e.path):
            tar.addfile(e.tarinfo(), io.BytesIO(e.data) if e.kind == "file" else None)


def tar_bytes(entries):
    buf = io.BytesIO()
    write_tar(buf, entries)
    return buf.getvalue()


def write_tar_gz(out, entries, level=9):
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch(),
                                               compresslevel=level) as gz:
        write_tar(gz, entries)


def tree_entries(root):
    """DIR's tree as entries under DIR's own name: directories 0755, files 0755 when executable
    on disk, else 0644."""
    top = os.path.basename(os.path.normpath(root))
    entries = [Entry(top + "/", "dir", 0o755)]
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        prefix = top if rel == "." else f"{top}/{rel}"
        for d in dirnames:
            entries.append(Entry(f"{prefix}/{d}/", "dir", 0o755))
        for f in filenames:
            path = os.path.join(dirpath, f)
            if os.path.islink(path):
                entries.append(Entry(f"{prefix}/{f}", "link", 0o777, link=os.readlink(path)))
                continue
            executable = os.stat(path).st_mode & stat.S_IXUSR
            with open(path, "rb") as fh:
                entries.append(Entry(f"{prefix}/{f}", "file", 0o755 if executable else 0o644, data=fh.read()))
    return entries


# --- the image's root filesystem -----------------------------------------------------------

def runtime_libraries(binary):
    """(path in the image, file on this host) for every library the dynamic loader maps for
    `binary`, and the loader itself, as `ldd` reports them."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        line = line.strip()
        m = re.match(r"^\S+ => (/\S+) \(0x[0-9a-f]+\)$", line) or re.match(r"^(/\S+) \(0x[0-9a-f]+\)$", line)
        if m:
            libs.append((m.group(1).lstrip("/"), os.path.realpath(m.group(1))))
        elif line.startswith("linux-vdso") or not line:
            continue
        else:
            die(f"cannot place the library of this ldd line of {binary} in the image: {line!r}")
    if not any(p.startswith("lib64/ld-linux") for p, _ in libs):
        die(f"ldd {binary} names no dynamic loader; is it a dynamically linked x86_64 binary?")
    return libs


def parents(path):
    parts = path.rstrip("/").split("/")[:-1]
    return ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]


def rootfs_entries(binary):
    def read(path):
        with open(path, "rb") as fh:
            return fh.read()

    if not os.path.isfile(CA_BUNDLE):
        die(f"{CA_BUNDLE} is missing: install the ca-certificates package (the image ships it for TLS)")
    files = [
        Entry(GATEWAY_PATH, "file", 0o755, data=read(binary)),
        Entry("etc/passwd", "file", 0o644, data=(
            "root:x:0:0:root:/root:/sbin/nologin\n"
            f"{IMAGE_USER}:x:{IMAGE_UID}:{IMAGE_UID}:bot-gateway:{STATE_DIR}:/sbin/nologin\n").encode()),
        Entry("etc/group", "file", 0o644, data=f"root:x:0:\n{IMAGE_USER}:x:{IMAGE_UID}:\n".encode()),
        # glibc's files and dns lookups are built into libc.so.6 (since 2.34): no module needed.
        Entry("etc/nsswitch.conf", "file", 0o644, data=b"passwd: files\ngroup: files\nhosts: files dns\n"),
        Entry(CA_BUNDLE.lstrip("/"), "file", 0o644, data=read(CA_BUNDLE)),
    ]
    for image_path, host_path in runtime_libraries(binary):
        mode = 0o755 if os.stat(host_path).st_mode & stat.S_IXUSR else 0o644
        files.append(Entry(image_path, "file", mode, data=read(host_path)))
    dirs = {
        "config/": Entry("config/", "dir", 0o755),
        # The gateway's state when nothing is mounted there (a named volume copies this owner).
        "state/": Entry("state/", "dir", 0o700, uid=IMAGE_UID),
        "tmp/": Entry("tmp/", "dir", 0o1777),
    }
    for f in files:
        for d in parents(f.path):
            dirs.setdefault(d, Entry(d, "dir", 0o755))
    return sorted(files + list(dirs.values()), key=lambda e: e.path)


def image_config(version, revision, layer_digest):
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch()))
    labels = {
        "org.opencontainers.image.title": "bot-gateway",
        "org.opencontainers.image.description": "Bot HTTP API gateway to an end-to-end encrypted platform",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": f"{IMAGE_UID}:{IMAGE_UID}",
            "Entrypoint": ["/" + GATEWAY_PATH],
            "Cmd": ["serve", CONFIG_PATH],
            "Env": [
                "PATH=/usr/local/bin",
                f"SSL_CERT_FILE={CA_BUNDLE}",
                f"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={CA_BUNDLE}",
                # Listening on 0.0.0.0 is expected here (published ports decide the exposure):
                # the gateway's off-loopback warning is for hosts.
                "BOT_GATEWAY_IN_CONTAINER=1",
            ],
            "ExposedPorts": {f"{p}/tcp": {} for p in PORTS},
            "Volumes": {STATE_DIR: {}},
            "StopSignal": "SIGTERM",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created": created, "created_by": f"scripts/release (bot-gateway {version})"}],
    }


def json_bytes(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def write_image(out, binary, version, revision):
    blobs = {}

    def blob(data):
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return "sha256:" + digest

    # Uncompressed layer: its digest is its diff_id, and every loader accepts it.
    layer = tar_bytes(rootfs_entries(binary))
    layer_digest = blob(layer)
    config = json_bytes(image_config(version, revision, layer_digest))
    config_digest = blob(config)
    manifest = json_bytes({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest,
                    "size": len(layer)}],
    })
    manifest_digest = blob(manifest)
    tag = f"bot-gateway:{version}"
    index = json_bytes({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": len(manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                # containerd (Docker's containerd store) names the image from the first,
                # podman from the second (normalised to localhost/bot-gateway:VERSION).
                "io.containerd.image.name": f"docker.io/library/{tag}",
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    })
    # Classic `docker load` reads only this file; it may point anywhere inside the tar.
    docker_manifest = json_bytes([{
        "Config": "blobs/sha256/" + config_digest.split(":")[1],
        "RepoTags": [tag],
        "Layers": ["blobs/sha256/" + layer_digest.split(":")[1]],
    }])
    entries = [
        Entry("oci-layout", "file", 0o644, data=json_bytes({"imageLayoutVersion": "1.0.0"})),
        Entry("index.json", "file", 0o644, data=index),
        Entry("manifest.json", "file", 0o644, data=docker_manifest),
        Entry("blobs/", "dir", 0o755),
        Entry("blobs/sha256/", "dir", 0o755),
    ] + [Entry("blobs/sha256/" + d, "file", 0o644, data=data) for d, data in blobs.items()]
    with open(out, "wb") as fh:
        write_tar(fh, entries)


def write_rootfs(dest, binary):
    """The same root filesystem as a directory tree (root only: owners are set)."""
    for e in rootfs_entries(binary):
        path = os.path.join(dest, e.path)
        if e.kind == "dir":
            os.makedirs(path, exist_ok=True)
        else:
            with open(path, "wb") as fh:
                fh.write(e.data)
        os.chown(path, e.uid, e.uid)
        os.chmod(path, e.mode)


def write_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    # The format `sha256sum -c` and `shasum -a 256 -c` read: digest, two spaces, the file's name.
    with open(path + ".sha256", "w") as fh:
        fh.write(f"{h.hexdigest()}  {os.path.basename(path)}\n")


def main(argv):
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__.strip())
        return 0
    cmd, args = argv[0], argv[1:]

    def option(name, default=None):
        if name in args:
            i = args.index(name)
            if i + 1 >= len(args):
                die(f"{name} needs a value")
            value = args[i + 1]
            del args[i : i + 2]
            return value
        if default is None:
            die(f"{cmd}: {name} is required")
        return default

    if cmd == "tar":
        level = int(option("--level", "9"))
        if len(args) != 2:
            die("usage: package.py tar OUT.tar.gz DIR [--level N]")
        write_tar_gz(args[0], tree_entries(args[1]), level)
    elif cmd == "image":
        binary, version, revision = option("--binary"), option("--version"), option("--revision", "")
        if len(args) != 1:
            die("usage: package.py image OUT.oci.tar --binary BIN --version V [--revision R]")
        write_image(args[0], binary, version, revision)
    elif cmd == "rootfs":
        binary = option("--binary")
        if len(args) != 1:
            die("usage: package.py rootfs DEST --binary BIN")
        write_rootfs(args[0], binary)
    elif cmd == "sha256":
        if not args:
            die("usage: package.py sha256 FILE...")
        for path in args:
            write_sha256(path)
    else:
        die(f"unknown command {cmd!r}; the commands are tar, image, rootfs, sha256 (see --help)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
