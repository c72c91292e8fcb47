"""Test hosts on one machine: network namespaces joined by a virtual link.

    with TestHosts("fzt") as hosts:
        p = hosts.start(0, ["fabric-run", ...], env)    # runs inside host 0
        hosts.kill_host(1)                              # every process of host 1
        hosts.cut_link()                                # the link goes down

Host i is the namespace <prefix><pid>h<i>, with loopback up and one end of a
veth pair holding 10.<net>.0.(i+1)/24. With `stray=True` host 1 also has a
second interface (stray0, a veth pair with both ends in host 1) holding
10.<net+1>.0.2/24 and the default route, so that an
address chosen by "the default interface" cannot reach host 0.

Teardown (context exit, atexit, SIGTERM/SIGINT) kills every process in the
namespaces and deletes them, which removes their interfaces; it then checks
that nothing is left and says so loudly if something is. Needs root (CI
runs as root) and `ip` from iproute2; `available()` says why not otherwise.
"""
import atexit
import os
import signal
import subprocess
import time

NET = 77


def available():
    """None when test hosts can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if subprocess.run(["which", "ip"], capture_output=True).returncode != 0:
        return "`ip` (iproute2) is not installed"
    probe = f"fzprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ip(*args, check=True):
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


class TestHosts:
    def __init__(self, prefix="fz", stray=False, count=2):
        tag = f"{prefix}{os.getpid() % 100000}"
        self.names = [f"{tag}h{i}" for i in range(count)]
        self.links = [f"{tag}v{i}" for i in range(count)]
        self.addresses = [f"10.{NET}.0.{i + 1}" for i in range(count)]
        self.stray = stray
        self.processes = []
        self._torn_down = False

    # -- setup -------------------------------------------------------------
    def __enter__(self):
        atexit.register(self.teardown)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        try:
            for name in self.names:
                ip("netns", "add", name)
                ip("-n", name, "link", "set", "lo", "up")
            # Two hosts: one veth pair. More: a bridge in host 0's namespace.
            ip("link", "add", self.links[0], "netns", self.names[0], "type", "veth",
               "peer", "name", self.links[1], "netns", self.names[1])
            for name, link, address in zip(self.names, self.links, self.addresses):
                ip("-n", name, "addr", "add", f"{address}/24", "dev", link)
                ip("-n", name, "link", "set", link, "up")
            if self.stray:
                host = self.names[1]
                # A veth pair with both ends in host 1: whatever leaves
                # through stray0 reaches nobody (no dummy driver needed).
                ip("-n", host, "link", "add", "stray0", "type", "veth", "peer", "name", "stray0p")
                ip("-n", host, "addr", "add", f"10.{NET + 1}.0.2/24", "dev", "stray0")
                ip("-n", host, "link", "set", "stray0", "up")
                ip("-n", host, "link", "set", "stray0p", "up")
                ip("-n", host, "route", "add", "default", "dev", "stray0")
        except Exception:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False

    def _on_signal(self, signum, frame):
        self.teardown()
        raise SystemExit(128 + signum)

    # -- use ---------------------------------------------------------------
    def start(self, host, argv, env=None, **popen):
        """Starts argv inside host `host` in its own session; stdout/stderr piped."""
        process = subprocess.Popen(["ip", "netns", "exec", self.names[host], *argv],
                                   env=env, stdout=popen.pop("stdout", subprocess.PIPE),
                                   stderr=popen.pop("stderr", subprocess.PIPE), text=True,
                                   start_new_session=True, **popen)
        self.processes.append(process)
        return process

    def run(self, host, argv):
        return subprocess.run(["ip", "netns", "exec", self.names[host], *argv], capture_output=True, text=True)

    def pids(self, host):
        out = ip("netns", "pids", self.names[host], check=False)
        return [int(p) for p in out.split()]

    def kill_host(self, host):
        """SIGKILL to every process of the host, as when a machine dies."""
        for _ in range(20):
            pids = self.pids(host)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    def cut_link(self):
        """Both ends of the link down: packets are lost, no connection is reset."""
        for name, link in zip(self.names, self.links):
            ip("-n", name, "link", "set", link, "down", check=False)

    def listening(self, host):
        """`ss -ltn` inside the host: (local address, port) of each listener."""
        out = self.run(host, ["ss", "-ltnH"]).stdout
        found = []
        for line in out.splitlines():
            fields = line.split()
            if len(fields) >= 4:
                address, _, port = fields[3].rpartition(":")
                found.append((address, port))
        return found

    # -- teardown ----------------------------------------------------------
    def teardown(self):
        if self._torn_down:
            return
        self._torn_down = True
        for host in range(len(self.names)):
            self.kill_host(host)
        for process in self.processes:
            try:
                process.kill()
            except OSError:
                pass
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for name in self.names:
            ip("netns", "del", name, check=False)
        left = [n for n in self.names if n in ip("netns", "list", check=False).split()]
        links = [l for l in self.links if l in ip("link", "show", check=False)]
        if left or links:
            print(f"TEST HOSTS LEFT BEHIND: namespaces {left}, interfaces {links}", flush=True)
            raise SystemExit(1)
