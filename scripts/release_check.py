#!/usr/bin/env python3
"""Verifies what scripts/release wrote into dist/out (`scripts/release --check` runs this).

    release_check.py --out dist/out --version VERSION --platform linux-amd64|macos-arm64

Checks, each printed as it passes; the first failure stops with what was wrong:
  * every archive has its .sha256, naming the archive only, and `sha256sum -c` (or
    `shasum -a 256 -c`) accepts it from the output directory;
  * the program archive holds exactly the expected files; the programs are stripped and name
    their debug file (.gnu_debuglink, same build id), and the debug file maps an address of the
    gateway to a line of our source; the example config is refused for its placeholders;
  * the container image archive: both the OCI layout and docker's manifest.json, every digest
    and size, the config (non-root user, entrypoint, ports), exactly the expected files in the
    layer, no shell and no package manager, no secret in any file, under 40 MB;
  * the image test: the layer unpacked into a temporary root, the gateway run there through
    chroot as the image's user against a platform server on loopback; a user sends a message
    with e2e-chat, the bot receives it with getUpdates and answers; the gateway's files in the
    state directory belong to the image's user; a state directory of the wrong owner or mode is
    refused with the fix;
  * dist/launchd plist, dist/systemd unit (systemd-analyze verify where it runs), dist/compose.yaml,
    dist/Dockerfile and .github/workflows/release.yml parse and say what they must.
Needs root for chroot (CI runs as root); otherwise it runs the gateway as the mapped root of a
user namespace (`unshare -r`), or fails saying so. Loopback only; every wait is bounded.
"""

import argparse
import hashlib
import io
import json
import os
import plistlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import package  # noqa: E402  (the writer: the image's user, paths and ports)

PROGRAMS = ("bot-gateway", "platform-server", "e2e-chat")
MAX_IMAGE_BYTES = 40 * 1000 * 1000
LAUNCHD_LABEL = "org.botgateway.gateway"
TOKEN_RE = re.compile(rb"\b[0-9]{1,20}:[0-9a-f]{64}\b")
HEX64_RE = re.compile(rb"(?<![0-9a-fA-F])[0-9a-f]{64}(?![0-9a-fA-F])")
PRIVATE_KEY_RE = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")

# The image's layer, exactly: (type, mode, owner) by path. Libraries are what `ldd` lists for the
# gateway on Debian 12 today; a new one is a decision to review here, not a silent addition.
LIBS = ("libc.so.6", "libcrypto.so.3", "libgcc_s.so.1", "libm.so.6", "libssl.so.3", "libstdc++.so.6")
EXPECTED_LAYER = {
    "config/": ("dir", 0o755, 0),
    "etc/": ("dir", 0o755, 0),
    "etc/group": ("file", 0o644, 0),
    "etc/nsswitch.conf": ("file", 0o644, 0),
    "etc/passwd": ("file", 0o644, 0),
    "etc/ssl/": ("dir", 0o755, 0),
    "etc/ssl/certs/": ("dir", 0o755, 0),
    "etc/ssl/certs/ca-certificates.crt": ("file", 0o644, 0),
    "lib/": ("dir", 0o755, 0),
    "lib/x86_64-linux-gnu/": ("dir", 0o755, 0),
    **{f"lib/x86_64-linux-gnu/{lib}": ("file", None, 0) for lib in LIBS},
    "lib64/": ("dir", 0o755, 0),
    "lib64/ld-linux-x86-64.so.2": ("file", 0o755, 0),
    "state/": ("dir", 0o700, package.IMAGE_UID),
    "tmp/": ("dir", 0o1777, 0),
    "usr/": ("dir", 0o755, 0),
    "usr/local/": ("dir", 0o755, 0),
    "usr/local/bin/": ("dir", 0o755, 0),
    "usr/local/bin/bot-gateway": ("file", 0o755, 0),
}
SHELLS_AND_PACKAGE_MANAGERS = {"sh", "bash", "dash", "ash", "zsh", "busybox", "apt", "apt-get", "dpkg", "rpm",
                               "yum", "dnf", "apk", "pip", "python3"}


class Failed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failed(msg)


def ok(msg):
    print(f"release check: ok: {msg}", flush=True)


def run(cmd, timeout=120, **kw):
    """Runs cmd (bounded) and returns the CompletedProcess; output captured as text."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise Failed(f"{cmd[0]} did not finish within {timeout} s: {' '.join(map(str, cmd))}")


# --- checksums -------------------------------------------------------------------------------

def check_checksums(out):
    archives = sorted(f for f in os.listdir(out) if f.endswith((".tar.gz", ".tar")))
    check(archives, f"no archive in {out}")
    sums = sorted(f for f in os.listdir(out) if f.endswith(".sha256"))
    check(sums == sorted(a + ".sha256" for a in archives),
          f"checksum files {sums} do not match the archives {archives} one to one")
    verify = ["sha256sum", "-c"] if shutil.which("sha256sum") else ["shasum", "-a", "256", "-c"]
    for a in archives:
        with open(os.path.join(out, a + ".sha256")) as fh:
            text = fh.read()
        check(re.fullmatch(r"[0-9a-f]{64}  " + re.escape(a) + r"\n", text),
              f"{a}.sha256 must be one line '<sha256>  {a}' naming the neighbouring file only; it is {text!r}")
        r = run(verify + [a + ".sha256"], cwd=out)
        check(r.returncode == 0 and r.stdout.strip() == f"{a}: OK",
              f"{' '.join(verify)} {a}.sha256 failed in {out}: {r.stdout}{r.stderr}")
    ok(f"{' '.join(verify)} accepts {len(archives)} archives from {out}: {', '.join(archives)}")


# --- the program archive ---------------------------------------------------------------------

def tar_members(path):
    with tarfile.open(path) as tar:
        return {m.name: m for m in tar.getmembers()}


def check_program_archive(out, name, work, platform):
    archive = os.path.join(out, name + ".tar.gz")
    members = tar_members(archive)
    extra = ("org.botgateway.gateway.plist",) if platform == "macos-arm64" else ()
    expected = {name} | {f"{name}/{f}" for f in PROGRAMS + ("README.md", "LICENSE", "config.example.json") + extra}
    check(set(members) == expected,
          f"{archive}: unexpected contents; missing {sorted(expected - set(members))}, "
          f"extra {sorted(set(members) - expected)}")
    for p in PROGRAMS:
        check(members[f"{name}/{p}"].mode == 0o755, f"{archive}: {p} is not mode 0755")
    with tarfile.open(archive) as tar:
        tar.extractall(work)
    ok(f"{name}.tar.gz holds exactly {', '.join(sorted(m.split('/', 1)[1] for m in expected if '/' in m))}")
    return os.path.join(work, name)


def elf_sections(path):
    r = run(["readelf", "-S", "-W", path])
    check(r.returncode == 0, f"readelf -S {path}: {r.stderr}")
    return set(re.findall(r"\]\s+(\.\S+)", r.stdout))


def build_id(path):
    r = run(["readelf", "-n", path])
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    check(m, f"{path} has no GNU build id")
    return m.group(1)


def check_debug_symbols(out, name, programs_dir, work):
    archive = os.path.join(out, name + "-debug.tar.gz")
    members = tar_members(archive)
    expected = {name + "-debug"} | {f"{name}-debug/{p}.debug" for p in PROGRAMS}
    check(set(members) == expected, f"{archive}: contents {sorted(members)}, expected {sorted(expected)}")
    with tarfile.open(archive) as tar:
        tar.extractall(work)
    debug_dir = os.path.join(work, name + "-debug")
    for p in PROGRAMS:
        binary, debug = os.path.join(programs_dir, p), os.path.join(debug_dir, p + ".debug")
        sections = elf_sections(binary)
        # (.debug_gdb_scripts is rustc's loaded section naming gdb's pretty printers, not symbols.)
        check(".symtab" not in sections and not any(s.startswith(".debug") and s != ".debug_gdb_scripts"
                                                     for s in sections),
              f"{p} in the archive is not stripped (sections: {sorted(sections)})")
        check(".gnu_debuglink" in sections, f"{p} has no .gnu_debuglink")
        link = run(["readelf", "--string-dump=.gnu_debuglink", binary]).stdout
        check(f"{p}.debug" in link, f"{p}'s .gnu_debuglink does not name {p}.debug: {link}")
        check(build_id(binary) == build_id(debug), f"{p} and {p}.debug have different build ids")
        check(any(s.startswith(".debug_line") for s in elf_sections(debug)), f"{p}.debug has no line tables")
    # A crash address of the gateway maps to a line of our source through the debug file alone.
    debug = os.path.join(debug_dir, "bot-gateway.debug")
    syms = run(["nm", "--defined-only", debug], timeout=300).stdout
    m = re.search(r"^([0-9a-f]+) [Tt] (_ZN\S*11bot_gateway7gateway5serve\S*)$", syms, re.M)
    check(m, "bot_gateway::gateway::serve not found in bot-gateway.debug's symbols")
    where = run(["addr2line", "-e", debug, "-f", "-C", m.group(1)], timeout=300).stdout
    check(re.search(r"src/gateway/\S+\.rs:\d+", where), f"addr2line did not map serve to src/gateway: {where!r}")
    ok(f"programs stripped, .gnu_debuglink + build id match {name}-debug.tar.gz; "
       f"addr2line maps 0x{m.group(1).lstrip('0')} to {where.split()[-1]}")


def compatibility_profile_id():
    with open(os.path.join(ROOT, "src", "compat.rs")) as fh:
        return re.search(r'COMPATIBILITY_PROFILE_ID: &str = "([^"]+)"', fh.read()).group(1)


def check_versions_and_example(programs_dir):
    for p in PROGRAMS:
        r = run([os.path.join(programs_dir, p), "--version"], timeout=30)
        print(f"release check: {p} --version (exit {r.returncode}): {(r.stdout + r.stderr).strip()}")
    with open(os.path.join(programs_dir, "config.example.json")) as fh:
        example = json.load(fh)
    profile = compatibility_profile_id()
    check(example["compatibility_profile_id"] == profile,
          f"config.example.json says profile {example['compatibility_profile_id']}, the gateway implements {profile}")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "config.json")
        shutil.copy(os.path.join(programs_dir, "config.example.json"), cfg)
        os.chmod(cfg, 0o600)
        r = run([os.path.join(programs_dir, "bot-gateway"), "serve", cfg], timeout=30)
    check(r.returncode != 0 and "placeholder" in r.stderr,
          f"bot-gateway serve config.example.json must refuse the placeholders; exit {r.returncode}: {r.stderr}")
    ok(f"config.example.json is profile {profile} and refused as is: {r.stderr.strip().splitlines()[-1]}")


# --- the container image ---------------------------------------------------------------------

def read_image(path):
    with tarfile.open(path) as tar:
        members = {m.name: m for m in tar.getmembers()}
        files = {n: tar.extractfile(m).read() for n, m in members.items() if m.isfile()}
    return members, files


def blob(files, digest):
    check(digest.startswith("sha256:"), f"digest {digest} is not sha256")
    path = "blobs/sha256/" + digest.split(":", 1)[1]
    check(path in files, f"the image archive lacks the blob {path}")
    data = files[path]
    check(hashlib.sha256(data).hexdigest() == digest.split(":", 1)[1], f"{path} does not hash to its name")
    return data


def check_image(out, name, version):
    path = os.path.join(out, name + ".oci.tar")
    size = os.path.getsize(path)
    check(size < MAX_IMAGE_BYTES, f"the image archive is {size} bytes, over {MAX_IMAGE_BYTES}")
    members, files = read_image(path)
    index = json.loads(files["index.json"])
    check(json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}, "oci-layout is wrong")
    check(len(index["manifests"]) == 1, "index.json must list one manifest")
    desc = index["manifests"][0]
    tag = f"bot-gateway:{version}"
    check(desc["platform"] == {"architecture": "amd64", "os": "linux"}, f"index.json platform: {desc.get('platform')}")
    check(desc["annotations"] == {"io.containerd.image.name": f"docker.io/library/{tag}",
                                  "org.opencontainers.image.ref.name": tag},
          f"index.json annotations: {desc.get('annotations')}")
    manifest_data = blob(files, desc["digest"])
    check(len(manifest_data) == desc["size"], "the manifest's size differs from index.json")
    manifest = json.loads(manifest_data)
    check(manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json", "manifest media type")
    config_data = blob(files, manifest["config"]["digest"])
    check(len(config_data) == manifest["config"]["size"], "the config's size differs from the manifest")
    check(len(manifest["layers"]) == 1, "the image must have one layer")
    layer_desc = manifest["layers"][0]
    check(layer_desc["mediaType"] == "application/vnd.oci.image.layer.v1.tar", "the layer must be an uncompressed tar")
    layer = blob(files, layer_desc["digest"])
    check(len(layer) == layer_desc["size"], "the layer's size differs from the manifest")
    docker = json.loads(files["manifest.json"])
    check(docker == [{"Config": "blobs/sha256/" + manifest["config"]["digest"][7:], "RepoTags": [tag],
                      "Layers": ["blobs/sha256/" + layer_desc["digest"][7:]]}],
          f"manifest.json (docker load) is wrong: {docker}")
    expected_members = {"oci-layout", "index.json", "manifest.json", "blobs", "blobs/sha256",
                        "blobs/sha256/" + desc["digest"][7:], "blobs/sha256/" + manifest["config"]["digest"][7:],
                        "blobs/sha256/" + layer_desc["digest"][7:]}
    check(set(members) == expected_members, f"the image archive holds {sorted(members)}")

    config = json.loads(config_data)
    cc = config["config"]
    uid = package.IMAGE_UID
    check(config["architecture"] == "amd64" and config["os"] == "linux", "config platform")
    check(config["rootfs"] == {"type": "layers", "diff_ids": [layer_desc["digest"]]}, "config diff_ids")
    check(cc["User"] == f"{uid}:{uid}", f"the image's user is {cc.get('User')!r}, not the non-root {uid}:{uid}")
    check(cc["Entrypoint"] == ["/usr/local/bin/bot-gateway"] and cc["Cmd"] == ["serve", "/config/config.json"],
          f"entrypoint {cc.get('Entrypoint')} cmd {cc.get('Cmd')}")
    check(set(cc["ExposedPorts"]) == {"8081/tcp", "8082/tcp"}, f"exposed ports {cc.get('ExposedPorts')}")
    check(cc["Volumes"] == {"/state": {}}, f"volumes {cc.get('Volumes')}")
    check(not any(re.search(r"TOKEN|SECRET|PASSWORD|KEY", e.split("=")[0]) for e in cc["Env"]),
          f"a secret-like variable in the image's Env: {cc['Env']}")
    ok(f"{name}.oci.tar: {size} bytes (< 40 MB); OCI index.json + docker manifest.json, digests and sizes "
       f"match; user {cc['User']}, entrypoint {cc['Entrypoint'] + cc['Cmd']}, ports 8081 8082")
    # A reader that is not ours: skopeo (containers/image, as podman uses) reads both layouts by name.
    check(shutil.which("skopeo"), "skopeo is not installed (scripts/setup.sh installs it): apt-get install skopeo")
    for transport in ("oci-archive", "docker-archive"):
        r = run(["skopeo", "inspect", "--config", f"{transport}:{path}:{tag}"], timeout=120)
        check(r.returncode == 0, f"skopeo cannot read the image as {transport}:…:{tag}: {r.stderr}")
        seen = json.loads(r.stdout)
        check(seen["architecture"] == "amd64" and seen["config"]["User"] == cc["User"]
              and seen["rootfs"]["diff_ids"] == config["rootfs"]["diff_ids"],
              f"skopeo reads a different image as {transport}: {seen}")
    ok(f"skopeo inspect reads it as oci-archive:…:{tag} and docker-archive:…:{tag} alike")

    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        entries = tar.getmembers()
        contents = {m.name: tar.extractfile(m).read() for m in entries if m.isfile()}
    got = {}
    for m in entries:
        key = m.name + "/" if m.isdir() else m.name
        got[key] = ("dir" if m.isdir() else "file" if m.isfile() else "other", m.mode, m.uid, m.gid)
    check(set(got) == set(EXPECTED_LAYER),
          f"the layer's files differ from the expected list: missing {sorted(set(EXPECTED_LAYER) - set(got))}, "
          f"extra {sorted(set(got) - set(EXPECTED_LAYER))}")
    for p, (kind, mode, owner) in EXPECTED_LAYER.items():
        gk, gm, gu, gg = got[p]
        check(gk == kind and (mode is None or gm == mode) and gu == gg == owner,
              f"{p} in the layer is {gk} mode {gm:o} uid {gu} gid {gg}; "
              f"expected {kind} mode {mode and oct(mode)} owner {owner}:{owner}")
    bad = [p for p in got if os.path.basename(p.rstrip("/")) in SHELLS_AND_PACKAGE_MANAGERS]
    check(not bad, f"the image holds a shell or package manager: {bad}")
    passwd = contents["etc/passwd"].decode()
    users = {f.split(":")[2]: f.split(":") for f in passwd.splitlines()}
    check(str(uid) in users and users[str(uid)][6] == "/sbin/nologin",
          f"/etc/passwd has no login-less user {uid}: {passwd!r}")
    check(f":{uid}:" in contents["etc/group"].decode(), f"/etc/group has no group {uid}")
    for p, data in contents.items():
        check(not TOKEN_RE.search(data), f"{p} in the image holds something shaped like a bot token")
        check(not PRIVATE_KEY_RE.search(data), f"{p} in the image holds a private key")
        if not data.startswith(b"\x7fELF"):
            check(not HEX64_RE.search(data), f"{p} in the image holds a 64-hex value (a secret or a Bot ID?)")
    check(not any(p.startswith(("state/", "config/")) and p not in ("state/", "config/") for p in got),
          "the image carries state or config files")
    ok(f"the layer holds exactly the {len(got)} expected entries (binary, {len(LIBS)} libraries + loader, "
       f"CA bundle, passwd/group, nsswitch, /config /state /tmp); no shell or package manager; user {uid} "
       "has no login shell; no token, key, 64-hex secret, state or config in any file")
    return layer, config


# --- the image test: the gateway from the image's root filesystem, end to end -------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def wait_for(what, seconds, probe, proc=None, log=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except (OSError, ValueError):
            pass
        if proc is not None and proc.poll() is not None:
            raise Failed(f"{what}: the process exited ({proc.returncode}){tail(log)}")
        time.sleep(0.25)
    raise Failed(f"{what}: not within {seconds} s{tail(log)}")


def tail(log):
    if not log or not os.path.exists(log):
        return ""
    with open(log, errors="replace") as fh:
        return "; last lines:\n" + "".join(fh.readlines()[-25:])


def stop(proc, seconds=20):
    """SIGTERM, then SIGKILL after `seconds`; returns the exit status (None if killed)."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def chroot_command(rootfs, argv):
    """How to run argv inside rootfs: chroot as the image's user when root, else inside a user
    namespace as its mapped root (the image's user cannot be mapped there)."""
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    uid = package.IMAGE_UID
    if os.geteuid() == 0:
        return [chroot, f"--userspec={uid}:{uid}", rootfs] + argv
    return ["unshare", "-r", chroot, rootfs] + argv


def unpack_layer(layer, rootfs):
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        kw = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
        tar.extractall(rootfs, numeric_owner=True, **kw)


def image_test(layer, config, programs_dir, work):
    if os.geteuid() != 0:
        r = run(["unshare", "-r", "true"], timeout=30)
        check(r.returncode == 0,
              "the image test runs the gateway through chroot: run it as root (CI does) or where "
              f"`unshare -r` works; here it fails: {r.stderr.strip()}")
        print("release check: not root: the gateway runs in the chroot as the mapped root of a user "
              "namespace, not as the image's user (the owner checks below are skipped)")
    rootfs = os.path.join(work, "rootfs")
    os.makedirs(rootfs)
    unpack_layer(layer, rootfs)
    platform_bin, chat_bin = os.path.join(programs_dir, "platform-server"), os.path.join(programs_dir, "e2e-chat")
    data_dir = os.path.join(work, "platform")
    os.makedirs(data_dir, mode=0o700)
    platform_log, gateway_log = os.path.join(work, "platform.log"), os.path.join(work, "gateway.log")
    procs = []
    try:
        with open(platform_log, "w") as err:
            platform = subprocess.Popen([platform_bin, "--listen", "127.0.0.1:0", "--data-dir", data_dir],
                                        stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True)
        procs.append(platform)
        line = read_line(platform, 60, platform_log)
        check(line.startswith("listening on "), f"platform-server's first line is {line!r}{tail(platform_log)}")
        url = "http://" + line.split()[-1]
        username = "image_test_bot"
        r = run([platform_bin, "create-bot", "--data-dir", data_dir, "--username", username,
                 "--name", "Image Test"], timeout=60)
        check(r.returncode == 0, f"create-bot failed: {r.stderr}")
        bot = json.loads(r.stdout)

        compat, ext = free_port(), free_port()
        cfg = {
            "compatibility_profile_id": compatibility_profile_id(),
            "bot_platform_endpoint": url,
            # The container's own config binds 0.0.0.0; the test stays on loopback.
            "compat_listen_addr": f"127.0.0.1:{compat}",
            "extensions_listen_addr": f"127.0.0.1:{ext}",
            "state_dir": package.STATE_DIR,
            "bots": [{k: bot[k] for k in ("bot_id_hex", "token", "identity_recovery_secret_hex",
                                          "compat_user_id", "username", "first_name")}],
        }
        config_file = os.path.join(rootfs, package.CONFIG_PATH.lstrip("/"))
        fd = os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(cfg, fh)
        if os.geteuid() == 0:
            os.chown(config_file, package.IMAGE_UID, package.IMAGE_UID)

        env = dict(e.split("=", 1) for e in config["config"]["Env"])
        env["RUST_LOG"] = "info"
        argv = config["config"]["Entrypoint"] + config["config"]["Cmd"]

        def start_gateway():
            with open(gateway_log, "w") as log:
                p = subprocess.Popen(chroot_command(rootfs, argv), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
            procs.append(p)
            return p

        gateway = start_gateway()

        def connected():
            status, body = http_json(f"http://127.0.0.1:{compat}/healthz", timeout=2)
            return status == 200 and all(b.get("connected") is True for b in body.get("bots") or [None])

        wait_for("the chrooted gateway connecting to the platform", 90, connected, gateway, gateway_log)
        ok(f"the gateway runs from the image's root filesystem ({' '.join(chroot_command('ROOT', argv))}) "
           f"and is connected to {url}")

        profile = os.path.join(work, "alice")
        r = run([chat_bin, "--server", url, "--profile", profile, "register", "alice", "--name", "Alice"], timeout=90)
        check(r.returncode == 0, f"e2e-chat register failed: {r.stderr}")
        text = "hello through the image " + secrets.token_hex(4)
        r = run([chat_bin, "--profile", profile, "send", "@" + bot["username"], text], timeout=90)
        check(r.returncode == 0, f"e2e-chat send failed: {r.stderr}")
        base = f"http://127.0.0.1:{compat}/bot{bot['token']}"
        deadline, got = time.monotonic() + 90, None
        while got is None and time.monotonic() < deadline:
            status, body = http_json(base + "/getUpdates", {"timeout": 5}, timeout=20)
            check(status == 200, f"getUpdates answered {status}: {body}{tail(gateway_log)}")
            for u in body["result"]:
                if u.get("message", {}).get("text") == text:
                    got = u
        check(got is not None, f"the message sent with e2e-chat never reached getUpdates{tail(gateway_log)}")
        check(got["message"]["from"].get("username") == "alice", f"the update is not from alice: {got}")
        chat_id = got["message"]["chat"]["id"]
        http_json(base + "/getUpdates", {"offset": got["update_id"] + 1, "timeout": 0}, timeout=20)
        reply = "answer from the image " + secrets.token_hex(4)
        status, body = http_json(base + "/sendMessage", {"chat_id": chat_id, "text": reply}, timeout=60)
        check(status == 200 and body.get("ok"), f"sendMessage answered {status}: {body}")
        r = run([chat_bin, "--profile", profile, "listen", "--timeout", "60", "--count", "1"], timeout=90)
        check(reply in r.stdout, f"alice did not receive the bot's answer: {r.stdout}{r.stderr}")
        ok("end to end through the chrooted gateway: alice's message arrived by getUpdates, the bot's "
           "sendMessage answer reached alice")

        code = stop(gateway)
        check(code is not None, f"the gateway did not exit within 20 s of SIGTERM{tail(gateway_log)}")
        state = os.path.join(rootfs, "state")
        owners = {f: os.stat(os.path.join(state, f)).st_uid for f in os.listdir(state)}
        check(any(f.endswith(".db") for f in owners), f"no database in the state directory: {sorted(owners)}")
        if os.geteuid() == 0:
            check(set(owners.values()) == {package.IMAGE_UID},
                  f"files in state_dir must belong to the image's user {package.IMAGE_UID}: {owners}")
        ok(f"SIGTERM: the gateway exited with {code}; state_dir holds {', '.join(sorted(owners))}, "
           f"owned by uid {sorted(set(owners.values()))}")

        if os.geteuid() == 0:
            # A mounted state_dir of the wrong owner, then of the wrong mode: refused, saying how to fix it.
            for what, prepare, expect in (
                ("owned by root", lambda: os.chown(state, 0, 0),
                 f"state_dir /state belongs to uid 0, but the gateway runs as uid {package.IMAGE_UID}"),
                ("mode 0755", lambda: (os.chown(state, package.IMAGE_UID, package.IMAGE_UID), os.chmod(state, 0o755)),
                 "run chmod 700 /state"),
            ):
                prepare()
                p = start_gateway()
                try:
                    code = p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    stop(p)
                    raise Failed(f"the gateway kept running with a state_dir {what}{tail(gateway_log)}")
                with open(gateway_log, errors="replace") as fh:
                    log = fh.read()
                check(code != 0 and expect in log,
                      f"a state_dir {what}: expected exit != 0 and {expect!r}; exit {code}{tail(gateway_log)}")
                ok(f"a state_dir {what} is refused: {[l for l in log.splitlines() if expect in l][0].strip()}")
            os.chmod(state, 0o700)
    finally:
        for p in procs:
            stop(p, 10)


def read_line(proc, seconds, log):
    """The first stdout line of proc, within `seconds`."""
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=seconds):
        raise Failed(f"no output from {proc.args[0]} within {seconds} s{tail(log)}")
    return proc.stdout.readline().strip()


# --- service definitions and CI --------------------------------------------------------------

def load_yaml(path):
    try:
        import yaml
    except ImportError:
        raise Failed("PyYAML is needed to check the YAML files: pip install pyyaml (or apt-get install python3-yaml)")
    with open(path) as fh:
        return yaml.safe_load(fh)


def check_launchd():
    path = os.path.join(ROOT, "dist", "launchd", LAUNCHD_LABEL + ".plist")
    with open(path, "rb") as fh:
        plist = plistlib.load(fh)
    check(plist.get("Label") == LAUNCHD_LABEL, f"{path}: Label {plist.get('Label')!r}, the file name says {LAUNCHD_LABEL}")
    args = plist.get("ProgramArguments")
    check(isinstance(args, list) and args[0].endswith("/bot-gateway") and args[1] == "serve" and len(args) == 3,
          f"{path}: ProgramArguments {args}")
    check(plist.get("RunAtLoad") is True, f"{path}: RunAtLoad must be true")
    check(plist.get("KeepAlive") not in (None, False), f"{path}: KeepAlive missing")
    check(isinstance(plist.get("ThrottleInterval"), int) and plist["ThrottleInterval"] >= 5,
          f"{path}: ThrottleInterval must be an integer of at least 5 seconds")
    for key in ("StandardOutPath", "StandardErrorPath", "WorkingDirectory"):
        check(isinstance(plist.get(key), str) and plist[key].startswith("/"), f"{path}: {key} must be an absolute path")
    ok(f"dist/launchd/{LAUNCHD_LABEL}.plist parses (plistlib): {' '.join(args)}, KeepAlive {plist['KeepAlive']}, "
       f"ThrottleInterval {plist['ThrottleInterval']}, logs {plist['StandardErrorPath']}")


def check_systemd(programs_dir, work):
    path = os.path.join(ROOT, "dist", "systemd", "bot-gateway.service")
    with open(path) as fh:
        unit = fh.read()
    settings = {}
    for line in unit.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";")):
            k, v = line.split("=", 1)
            settings.setdefault(k.strip(), []).append(v.strip())
    for key, want in (("Type", "simple"), ("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"),
                      ("ProtectHome", "yes"), ("PrivateTmp", "yes"), ("Restart", "on-failure"),
                      ("StateDirectory", "bot-gateway"), ("StateDirectoryMode", "0700"),
                      ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX")):
        check(settings.get(key) == [want], f"{path}: {key}={want} expected, found {settings.get(key)}")
    check(settings.get("User") == ["bot-gateway"], f"{path}: User=bot-gateway expected")
    if not shutil.which("systemd-analyze"):
        print("release check: systemd-analyze is not installed: the unit was only read, not verified")
        return
    # verify wants ExecStart's program to exist: in a private mount namespace, a directory
    # holding the archive's gateway is mounted over /usr/local/bin (nothing on the host changes).
    bindir = os.path.join(work, "systemd-bin")
    os.makedirs(bindir)
    shutil.copy(os.path.join(programs_dir, "bot-gateway"), bindir)
    ns = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "-r", "--mount"]
    script = 'mount --bind "$1" /usr/local/bin && exec systemd-analyze verify "$2"'
    r = run(ns + ["sh", "-c", script, "sh", bindir, path], timeout=60)
    check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
          f"systemd-analyze verify {path}: exit {r.returncode}: {r.stdout}{r.stderr}")
    version = run(["systemd-analyze", "--version"]).stdout.splitlines()[0]
    ok(f"dist/systemd/bot-gateway.service: systemd-analyze verify passes, no warnings ({version})")


def check_compose_and_dockerfile(config):
    compose = load_yaml(os.path.join(ROOT, "dist", "compose.yaml"))
    service = compose["services"]["bot-gateway"]
    ports = service.get("ports", [])
    check(sorted(ports) == ["127.0.0.1:8081:8081", "127.0.0.1:8082:8082"],
          f"dist/compose.yaml must publish 8081 and 8082 on host loopback only; ports: {ports}")
    vols = service.get("volumes", [])
    check(any(str(v).endswith(":/state") for v in vols) and any(":/config/config.json" in str(v) for v in vols),
          f"dist/compose.yaml must mount /state and /config/config.json: {vols}")
    with open(os.path.join(ROOT, "dist", "Dockerfile")) as fh:
        docker = fh.read()
    stages = re.findall(r"^FROM\s+(\S+)", docker, re.M)
    check(len(stages) >= 2 and stages[-1] == "scratch", f"dist/Dockerfile must be multi-stage ending FROM scratch: {stages}")
    cc = config["config"]
    for line in (f"USER {cc['User']}", "ENTRYPOINT " + json.dumps(cc["Entrypoint"]), "CMD " + json.dumps(cc["Cmd"]),
                 "ENV " + " ".join(cc["Env"]), "VOLUME /state", "EXPOSE 8081 8082", "scripts/package.py rootfs"):
        check(line in docker, f"dist/Dockerfile lacks {line!r} (the archive's image says so)")
    ok("dist/compose.yaml parses (PyYAML), publishes 127.0.0.1:8081 and 127.0.0.1:8082 only, mounts /state and "
       "the config; dist/Dockerfile is multi-stage, FROM scratch, same user/entrypoint/rootfs as the archive")


def check_workflow():
    wf = load_yaml(os.path.join(ROOT, ".github", "workflows", "release.yml"))
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    check(on and "push" in on and "workflow_dispatch" in on, f"release.yml triggers: {on}")
    jobs = wf["jobs"]
    mac = jobs.get("macos-arm64") or {}
    check(mac.get("runs-on") == "macos-14", "release.yml: the macos-arm64 job must run on macos-14 (Apple Silicon)")
    steps = mac.get("steps", [])
    text = "\n".join(str(s.get("run", "")) + str(s.get("uses", "")) + json.dumps(s.get("with", {})) for s in steps)
    for needle in ("scripts/release", "otool -L", "codesign", "actions/upload-artifact", ".sha256",
                   "shasum -a 256 -c"):
        check(needle in text, f"release.yml: the macos-arm64 job has no step with {needle!r}")
    linux = jobs.get("linux-amd64") or {}
    check(str(linux.get("runs-on", "")).startswith("ubuntu"), "release.yml: the linux-amd64 job must run on ubuntu")
    ltext = "\n".join(str(s.get("run", "")) + str(s.get("uses", "")) for s in linux.get("steps", []))
    check("scripts/release" in ltext and "actions/upload-artifact" in ltext, "release.yml: the linux job must release and upload")
    ok(f"release.yml parses (PyYAML): jobs {sorted(jobs)}; macos-arm64 on macos-14 builds, checks otool/codesign, "
       "verifies and uploads the archive with its .sha256")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--platform", required=True, choices=("linux-amd64", "macos-arm64"))
    a = ap.parse_args()
    name = f"bot-gateway-{a.version}-{a.platform}"
    work = tempfile.mkdtemp(prefix="bot-gateway-release-check.")
    os.chmod(work, 0o755)  # the image's user walks through it to the chroot
    try:
        check_checksums(a.out)
        programs_dir = check_program_archive(a.out, name, work, a.platform)
        check_launchd()
        if a.platform == "linux-amd64":
            # The repository's YAML is checked once, on Linux (the Mac runner has no PyYAML).
            check_workflow()
            check_debug_symbols(a.out, name, programs_dir, work)
            check_versions_and_example(programs_dir)
            layer, config = check_image(a.out, name, a.version)
            check_compose_and_dockerfile(config)
            check_systemd(programs_dir, work)
            image_test(layer, config, programs_dir, work)
    except Failed as e:
        print(f"release check: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        # The work directory held a bot's token and recovery secret (the test's config).
        shutil.rmtree(work, ignore_errors=True)
    print("release check: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
