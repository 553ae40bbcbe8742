// Isolation, attacked from inside: the escape probe, a host-side posture
// check, resource bombs next to a neighbour that must keep answering,
// orphans, signals to the agent, hostile layers, and the network policy.
//
// The suite runs once per sandbox class (lib/daemon.mjs: CLASS). Where the
// gvisor class isolates differently on purpose, the test checks what it
// does instead, from inside and from the host; docs/security.md lists
// every such difference ("The gvisor class: what differs").
//
// Every address the network tests aim at is bound on this machine or
// routed (a /32) into a network namespace the test makes, so no packet
// leaves the machine even if the filter were broken. The host's default
// route and DNS are never touched. `npm install` (the one test that needs
// the internet) runs only with SANDBOXD_TEST_INTERNET=1.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  readFileSync, readdirSync, existsSync, writeFileSync, statfsSync, statSync, mkdtempSync,
  rmSync, symlinkSync, mkdirSync, readlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import net from "node:net";
import { join, dirname } from "node:path";
import { Daemon, Client, sleep, until, BIN, IMAGES, HAVE_DEBIAN, GVISOR } from "./lib/daemon.mjs";
import { fakeDns as resolver } from "./lib/dns.mjs";

const PROBE = process.env.SANDBOXD_PROBE || join(dirname(BIN), "tests/probe");
const INIT = join(dirname(BIN), "sandbox-init");
// The probe's profile: under gVisor it asserts what gVisor's kernel answers
// where the ns class's seccomp filter refuses (tests/probe/probe.c).
const PROFILE = GVISOR ? ["--profile=gvisor"] : [];
const DOCKER_CAPS = "00000000a80425fb";
const CANARY_VALUE = `canary-${randomBytes(12).toString("hex")}`;
const CANARY_ENV = { [`SANDBOXD_CANARY_${process.pid}`]: CANARY_VALUE };
// Small limits so the bombs hit them fast.
const LIMITS = ["--pids-limit", "128", "--memory-limit", "128M", "--tmp-size", "16M",
  "--disk-limit", "64M"];
// The host cgroup's pids.max of a sandbox: its gVisor kernel's threads and
// one systrap stub per process count there too (src/runtime/gvisor.h).
const HOST_PIDS = GVISOR ? 2 * 128 + 128 : 128;

// ---- host-side helpers ----

const sh = (cmd) => execFileSync("/bin/sh", ["-c", cmd], { stdio: ["ignore", "pipe", "pipe"] }).toString();
const sha = (path) => createHash("sha256").update(readFileSync(path)).digest("hex");
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function cgroupBase(d) {
  const inst = readFileSync(join(d.state, "instance-id"), "utf8").trim();
  const v2 = existsSync("/sys/fs/cgroup/unified/cgroup.procs") ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
  return { v2: join(v2, "sandboxd", inst), inst, pureV2: v2 === "/sys/fs/cgroup" };
}
// A limit file of the sandbox's cgroup (v1 controller dir on hybrid hosts).
function limitFile(d, id, ctrl, file) {
  const { v2, inst, pureV2 } = cgroupBase(d);
  return pureV2 ? join(v2, `sb-${id}`, file) : join("/sys/fs/cgroup", ctrl, "sandboxd", inst, `sb-${id}`, file);
}
function sandboxIds(d) {
  const { v2 } = cgroupBase(d);
  if (!existsSync(v2)) return [];
  return readdirSync(v2).filter((n) => n.startsWith("sb-")).map((n) => n.slice(3));
}
function pidsOf(d, id) {
  try {
    return readFileSync(join(cgroupBase(d).v2, `sb-${id}`, "cgroup.procs"), "utf8")
      .split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
const comm = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
};
const cmdline = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
};
// The sandbox whose /workspace holds `marker`, seen from the host through
// one of its processes (works whatever backs the writable layer). A gvisor
// sandbox's processes are not host processes: its files are the overlay
// the driver mounts at <dir>/root.
function findSandbox(d, marker) {
  for (const id of sandboxIds(d)) {
    const dir = join(d.state, "sandboxes", id);
    if (GVISOR ? existsSync(join(dir, "root/workspace", marker))
      : pidsOf(d, id).some((pid) => existsSync(`/proc/${pid}/root/workspace/${marker}`)))
      return { id, pids: pidsOf(d, id), dir };
  }
  throw new Error(`no sandbox holds /workspace/${marker}`);
}
// The host processes of a gvisor sandbox, all `exe` by comm: runsc's
// sentry (the sandbox's kernel), its gofer (which serves the sandbox's
// files) and the systrap stubs (one per sandboxed process, children of
// the sentry).
function runscProcs(d, id) {
  const pids = pidsOf(d, id);
  const sentry = pids.find((p) => cmdline(p)[0] === "runsc-sandbox");
  const gofer = pids.find((p) => cmdline(p)[0] === "runsc-gofer");
  return { sentry, gofer, stubs: pids.filter((p) => p !== sentry && p !== gofer) };
}
const ident = (path) => {
  const st = statSync(path);
  return `${st.dev}:${st.ino}`;
};
function status(pid) {
  const out = {};
  for (const line of readFileSync(`/proc/${pid}/status`, "utf8").split("\n")) {
    const i = line.indexOf(":");
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return out;
}

async function put(c, name, path, body) {
  const r = await c.data(name, "PUT", `/files?path=${encodeURIComponent(path)}`, body, true);
  assert.equal(r.status, 204, `PUT ${path}: ${r.status} ${JSON.stringify(r.body)}`);
}
async function installProbe(c, name) {
  await put(c, name, "/workspace/probe", readFileSync(PROBE));
  const r = await c.exec(name, ["chmod", "+x", "/workspace/probe"]);
  assert.equal(r.exitCode, 0, r.stderr);
}
async function runProbe(c, name, args, timeoutMs = 60000) {
  const r = await c.exec(name, ["/workspace/probe", ...PROFILE, ...args], { timeoutMs });
  assert.equal(r.exitCode, 0, `probe exit ${r.exitCode}: ${r.stderr}\n${r.stdout}`);
  return JSON.parse(r.stdout).checks;
}
function assertNothingReached(checks, expected = []) {
  const names = checks.map((c) => c.name);
  for (const n of expected) assert.ok(names.includes(n), `probe did not run ${n}`);
  const reached = checks.filter((c) => c.reached);
  assert.deepEqual(reached.map((c) => `${c.name}: ${c.detail}`), []);
}

// Execs in `name` keep answering (each within maxMs) while `busy()` runs.
async function keepsAnswering(c, name, busy, { maxMs = 5000, every = 200 } = {}) {
  let done = false, count = 0;
  const loop = (async () => {
    while (!done) {
      const t0 = Date.now();
      const r = await c.exec(name, ["/bin/echo", "pong"], { timeoutMs: maxMs });
      const dt = Date.now() - t0;
      assert.equal(r.stdout, "pong\n");
      assert.ok(dt < maxMs, `neighbour took ${dt} ms`);
      count++;
      await sleep(every);
    }
  })();
  try {
    return await busy();
  } finally {
    done = true;
    await loop;
    assert.ok(count >= 1, "the neighbour never answered");
  }
}

// ---- the shared daemon ----

let d, c;
before(async () => {
  d = await new Daemon({ env: CANARY_ENV, args: [...LIMITS, "--network", "none", "--pool-size", "0"] }).start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));

test("the escape probe reaches nothing", async () => {
  // A neighbour's process and a host process: neither may be signalled.
  await c.sh("neighbour", "echo n > /workspace/neighbour-marker");
  const bg = await c.data("neighbour", "POST", "/processes", { command: ["/bin/sleep", "1000"] });
  assert.equal(bg.status, 200);
  await sleep(100);
  const nb = findSandbox(d, "neighbour-marker");
  // A gvisor neighbour's sleep is a task of its own kernel, not a host
  // process: the host processes that are the neighbour are its sentry and
  // gofer (and stubs), which must not be signalled either.
  const nbPids = GVISOR ? Object.values(runscProcs(d, nb.id)).flat().filter(Boolean)
    : [nb.pids.find((p) => comm(p) === "sleep")];
  assert.ok(nbPids.length && nbPids.every(Boolean), "neighbour's processes not found");
  const initSha = GVISOR && sha(INIT);
  const hostProc = spawn("/bin/sleep", ["60"], { stdio: "ignore" });
  const hostFile = join(d.state, `host-only-${process.pid}`);
  writeFileSync(hostFile, "host");
  // A host abstract unix socket (those live in the network namespace).
  const abstract = `sandboxd-test-${process.pid}`;
  const absSrv = net.createServer((s) => s.end("host\n"));
  await new Promise((r) => absSrv.listen(`\0${abstract}`, r));
  try {
    await installProbe(c, "probe");
    const checks = await runProbe(c, "probe", [
      `--canary=${CANARY_VALUE}`, `--pid=${hostProc.pid}`, ...nbPids.map((p) => `--pid=${p}`),
      `--pid=${d.proc.pid}`, `--pid=${process.pid}`, `--host-file=${hostFile}`, `--abstract=${abstract}`,
    ]);
    assertNothingReached(checks, [
      "proc_exe_write", "fd_leak", "agent_hidden", "cwd_leak", "proc_sys_write", "masked_paths", "mknod",
      "host_devices", "cgroupfs_mount", "new_namespaces", "userns_confined", "packet_netlink_sockets",
      "ptrace_pid1", "signal_pid1", "signal_outside", "keyring", "bpf_perf_io_uring_userfaultfd", "mount_api",
      "other_syscalls", "tiocsti_tioclinux", "i386_int80", "x32_syscall", "env_canary", "host_files", "posture",
      "mounts", "abstract_unix", "kill_all",
    ]);
    const detail = (n) => checks.find((x) => x.name === n).detail;
    if (GVISOR) {
      // gVisor implements no foreign ABI for a 64-bit process: every
      // i386 and x32 call answers ENOSYS (no filter is there to kill).
      assert.match(detail("x32_syscall"), /ENOSYS/);
      assert.match(detail("i386_int80"), /ENOSYS \(gVisor has no i386 ABI\)/);
      // PID 1 is the guard, the probe could not find sandbox-init.
      assert.match(detail("agent_hidden"), /pids in \/proc/);
      // The sandbox-init binary the gofer serves read-only is unchanged.
      assert.equal(sha(INIT), initSha);
    } else {
      // The foreign ABIs are killed by seccomp (SIGSYS), not merely
      // refused; a kernel without i386 emulation answers int 0x80 with
      // SIGSEGV.
      assert.match(detail("x32_syscall"), /killed by signal 31/);
      assert.match(detail("i386_int80"), /killed by signal (31|11)/);
      assert.match(detail("userns_confined"), /unshare\(user\|mnt\): Operation not permitted/);
    }
    assert.ok(alive(hostProc.pid), "host process was killed");
    for (const p of nbPids) assert.ok(alive(p), `neighbour's process ${p} (${comm(p)}) was killed`);
    assert.equal((await c.data("neighbour", "GET", `/processes/${bg.body.processId}`)).body.state, "running");
    assert.equal((await c.exec("neighbour", ["/bin/echo", "ok"])).stdout, "ok\n");
    // The agent survived kill(-1) and the signals: it still runs commands.
    assert.equal((await c.exec("probe", ["/bin/echo", "ok"])).stdout, "ok\n");
  } finally {
    hostProc.kill("SIGKILL");
    absSrv.close();
  }
});

test("the sandbox's kernel: the host's (ns), gVisor's own (gvisor)", async () => {
  const r = await c.sh("kernel", "uname -r; cat /proc/version; dmesg 2>&1 | head -1");
  const [release, version, log] = r.stdout.split("\n");
  const host = { release: sh("uname -r").trim(), version: readFileSync("/proc/version", "utf8").trim() };
  if (GVISOR) {
    assert.notEqual(release, host.release);
    assert.notEqual(version, host.version);
    assert.match(log, /Starting gVisor/);
  } else {
    assert.equal(release, host.release);
    assert.equal(version, host.version);
    assert.doesNotMatch(log, /gVisor/); // syslog is refused by seccomp
  }
});

// gvisor: the workload is a task of the sandbox's own kernel, not a host
// process; the host sees runsc's sentry, gofer and stubs. What they can
// reach is read here, the workload's own posture by the probe inside.
async function gvisorPosture(sb, neighbour) {
  const { sentry, gofer, stubs } = runscProcs(d, sb.id);
  assert.ok(sentry && gofer && stubs.length >= 1, `runsc processes of sandbox ${sb.id}: ${sb.pids.map((x) => `${x}:${cmdline(x)[0]}`)}`);
  const hostRoot = ident("/");
  const forbidden = new Map([[hostRoot, "the host's /"], [ident(d.state), "the daemon's state dir"],
    [ident(neighbour.dir), "the neighbour's dir"], [ident(join(neighbour.dir, "root")), "the neighbour's files"]]);
  const hostFile = join(d.state, `host-only-posture-${process.pid}`);
  writeFileSync(hostFile, "host");
  try {
    for (const [role, pid] of [["sentry", sentry], ["gofer", gofer], ...stubs.map((x) => ["stub", x])]) {
      const st = status(pid);
      assert.equal(st.NoNewPrivs, "1", `${role} ${pid}`);
      assert.equal(st.Seccomp, "2", `${role} ${pid}`);
      assert.ok(Number(st.Seccomp_filters) >= 1, `${role} ${pid}: Seccomp_filters ${st.Seccomp_filters}`);
      assert.equal(st.CapInh, "0000000000000000", `${role} ${pid}`);
      assert.equal(st.CapAmb, "0000000000000000", `${role} ${pid}`);
      // Its own user, mount, network, IPC and UTS namespaces; the gofer
      // has its own pid namespace too. This runsc starts the sentry in
      // the host's pid namespace (its seccomp filter lets it signal only
      // its own thread group) and every runsc process in the host's
      // cgroup namespace (it sits in the sandbox's cgroups).
      for (const ns of ["user", "mnt", "net", "ipc", "uts", ...(role === "gofer" ? ["pid"] : [])])
        assert.notEqual(readlinkSync(`/proc/${pid}/ns/${ns}`), readlinkSync(`/proc/self/ns/${ns}`), `${role} ${pid}: ${ns}`);
      // Its root is not the host's: the sentry's is an empty directory of
      // runsc's; the gofer's is the sandbox's own tree, which it serves.
      assert.notEqual(ident(`/proc/${pid}/root`), hostRoot, `${role} ${pid}: root`);
      const root = `/proc/${pid}/root`;
      assert.equal(existsSync(join(root, hostFile)), false, `${role} ${pid} reaches ${hostFile}`);
      assert.equal(existsSync(join(root, neighbour.dir)), false, `${role} ${pid} reaches the neighbour's dir`);
      assert.equal(existsSync(join(root, "workspace/neighbour-marker")), false, `${role} ${pid} reaches the neighbour's files`);
      if (role === "gofer") assert.ok(existsSync(join(root, "workspace/posture-marker")), "the gofer's root is the sandbox's tree");
      if (role === "sentry") assert.equal(existsSync(join(root, "workspace")), false, "the sentry's root holds the sandbox's files");
      // No fd of it is the host's /, the daemon's state or the neighbour.
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        let id;
        try { id = ident(`/proc/${pid}/fd/${fd}`); } catch { continue; }
        assert.ok(!forbidden.has(id), `${role} ${pid} fd ${fd} is ${forbidden.get(id)}`);
      }
      assert.equal(readFileSync(`/proc/${pid}/environ`, "utf8").includes(CANARY_VALUE), false, `${role} ${pid}: canary`);
    }
  } finally {
    rmSync(hostFile, { force: true });
  }
  // The workload's own posture, from inside: capabilities (Docker's set:
  // CAP_SYS_ADMIN, which sandbox-init keeps to build the guard, dropped),
  // no_new_privs, no inherited fd or outside cwd, no canary anywhere.
  await installProbe(c, "posture");
  const checks = await runProbe(c, "posture", [`--canary=${CANARY_VALUE}`, "--no-kill-all", "--only=posture",
    "--only=fd_leak", "--only=cwd_leak", "--only=env_canary", "--only=agent_hidden"]);
  assertNothingReached(checks, ["posture", "fd_leak", "cwd_leak", "env_canary", "agent_hidden"]);
  assert.match(checks.find((x) => x.name === "posture").detail, /CapEff a80425fb CapBnd a80425fb NoNewPrivs 1 Seccomp 0/);
  assert.equal((await c.sh("posture", "pwd")).stdout, "/workspace\n");
}

test("posture of a workload process, read from the host", async () => {
  await c.sh("posture", "echo p > /workspace/posture-marker");
  const p = await c.data("posture", "POST", "/processes", { command: ["/bin/sleep", "1000"] });
  assert.equal(p.status, 200);
  await sleep(100);
  const sb = findSandbox(d, "posture-marker");
  if (GVISOR) return gvisorPosture(sb, findSandbox(d, "neighbour-marker"));
  const pid = sb.pids.find((x) => comm(x) === "sleep");
  assert.ok(pid, "workload process not found in the sandbox's cgroup");
  const st = status(pid);
  assert.equal(st.CapEff, DOCKER_CAPS);
  assert.equal(st.CapPrm, DOCKER_CAPS);
  assert.equal(st.CapBnd, DOCKER_CAPS);
  assert.equal(st.CapInh, "0000000000000000");
  assert.equal(st.CapAmb, "0000000000000000");
  assert.equal(st.NoNewPrivs, "1");
  assert.equal(st.Seccomp, "2");
  assert.ok(Number(st.Seccomp_filters) >= 2, `Seccomp_filters ${st.Seccomp_filters}`);
  // Root inside is an unprivileged host uid of this sandbox's own range.
  const [ruid, euid] = st.Uid.split(/\s+/).map(Number);
  assert.ok(ruid >= 65536 && euid >= 65536, `host uid ${st.Uid}`);
  assert.equal(readFileSync(`/proc/${pid}/uid_map`, "utf8").trim().split(/\s+/)[0], "0");
  for (const ns of ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"])
    assert.notEqual(readlinkSync(`/proc/${pid}/ns/${ns}`), readlinkSync(`/proc/self/ns/${ns}`), ns);
  // Each sandbox has a range of its own.
  const other = findSandbox(d, "neighbour-marker").pids[0];
  assert.notEqual(Number(status(other).Uid.split(/\s+/)[0]), ruid);
  // No daemon fd or cwd reached the workload.
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    assert.ok(Number(fd) <= 2, `fd ${fd} -> ${target}`);
    assert.ok(!target.startsWith("/") || target === "/dev/null", `fd ${fd} -> ${target}`);
    assert.ok(!statSync(`/proc/${pid}/fd/${fd}`).isDirectory(), `fd ${fd} is a directory`);
  }
  assert.equal(readlinkSync(`/proc/${pid}/cwd`), "/workspace");
  assert.equal(readFileSync(`/proc/${pid}/environ`, "utf8").includes(CANARY_VALUE), false);
  // The agent (PID 1 inside) got none of the daemon's environment either.
  const init = sb.pids.find((x) => readFileSync(`/proc/${x}/status`, "utf8").match(/^NSpid:.*\s1$/m));
  assert.ok(init, "the sandbox's PID 1 is not in its cgroup");
  assert.equal(readFileSync(`/proc/${init}/environ`, "utf8"), "");
  assert.equal(status(init).NoNewPrivs, "1");
  assert.equal(status(init).Seccomp, "2");
});

test("a fork bomb stays inside its sandbox while a neighbour keeps answering", async () => {
  await c.sh("bomb", "echo b > /workspace/bomb-marker");
  await c.attach("calm");
  const id = findSandbox(d, "bomb-marker").id;
  const p = await c.data("bomb", "POST", "/processes", { command: ["/bin/sh", "-c", "f() { f | f & }; f; sleep 30"] });
  assert.equal(p.status, 200);
  let peak = 0;
  const hitMax = () => /max [1-9]/.test(readFileSync(limitFile(d, id, "pids", "pids.events"), "utf8"));
  await keepsAnswering(c, "calm", async () => {
    // 3 s at least, and until the bomb has run into the limit (a loaded
    // host takes longer to get there, gVisor's stubs longer still: each
    // new address space is a host stub process, made at the pace of a
    // CPU shared with the rest of the suite).
    const rounds = GVISOR ? 900 : 200;
    for (let i = 0; i < 30 || (i < rounds && !hitMax()); i++) {
      await sleep(100);
      peak = Math.max(peak, Number(readFileSync(limitFile(d, id, "pids", "pids.current"), "utf8")));
    }
  });
  assert.ok(peak <= HOST_PIDS, `pids.current peaked at ${peak}`);
  // The bomb did run into the limit (forks were refused). Under gVisor a
  // loaded host may make the sentry's stubs too slowly for the last few
  // within the 90 s: there, coming within 4% of it shows the same (the
  // sandbox was held at the host's limit, not by its own pace).
  const near = GVISOR && peak >= HOST_PIDS * 0.96;
  assert.ok(hitMax() || near, `the bomb never reached pids.max (peak ${peak} of ${HOST_PIDS})`);
  // The host still forks.
  assert.equal(sh("echo host-ok"), "host-ok\n");
  // Killing the bomb's group brings its own sandbox back. (A gvisor
  // sandbox whose kernel could not make its threads at pids.max has
  // stopped as a whole: the next call starts it again.)
  await c.data("bomb", "DELETE", `/processes/${p.body.processId}`);
  assert.equal(await until(async () => {
    try {
      return (await c.exec("bomb", ["/bin/echo", "back"], { timeoutMs: 3000 })).stdout === "back\n";
    } catch {
      return false;
    }
  }), true);
  // With its files.
  assert.equal((await c.exec("bomb", ["/bin/cat", "/workspace/bomb-marker"])).stdout, "b\n");
});

test("a memory bomb is OOM-killed inside its sandbox; the agent and a neighbour live", async () => {
  await c.sh("membomb", "echo m > /workspace/mem-marker");
  await installProbe(c, "membomb");
  const id = findSandbox(d, "mem-marker").id;
  const sentry = GVISOR && runscProcs(d, id).sentry;
  const r = await keepsAnswering(c, "calm", () =>
    c.exec("membomb", ["/workspace/probe", "memhog"], { timeoutMs: 30000 }));
  assert.equal(r.timedOut, false);
  // gvisor: the host's OOM killer takes the largest process of the
  // cgroup, the systrap stub that holds the workload's memory, and gVisor
  // ends the task whose address space is gone with status 1. The sentry
  // (the sandbox's kernel) is not the victim: the same process runs on.
  assert.equal(r.exitCode, GVISOR ? 1 : 137, `memhog exit ${r.exitCode}: ${r.stdout.slice(-200)}`);
  if (GVISOR) assert.equal(runscProcs(d, id).sentry, sentry, "the sandbox's kernel was OOM-killed");
  const mib = Number((r.stdout.trim().split("\n").pop() || "0 ").split(" ")[0]);
  assert.ok(mib <= 128, `memhog got ${mib} MiB past a 128 MiB limit`);
  const events = cgroupBase(d).pureV2 ? "memory.events" : "memory.oom_control";
  const oom = readFileSync(limitFile(d, id, "memory", events), "utf8");
  assert.match(oom, /oom_kill [1-9]/);
  // The agent was not the victim.
  assert.equal((await c.exec("membomb", ["/bin/echo", "alive"])).stdout, "alive\n");
});

test("disk, /tmp and /dev/shm fill up to their caps: ENOSPC inside, host disk untouched", async () => {
  await c.sh("diskfill", "echo d > /workspace/disk-marker");
  const host0 = statfsSync(d.state);
  const free0 = host0.bavail * host0.bsize;
  const r = await keepsAnswering(c, "calm", () => c.sh("diskfill",
    "dd if=/dev/zero of=/workspace/fill bs=1M 2>&1; echo rc=$?; ls -l /workspace/fill",
    { timeoutMs: 60000 }));
  assert.match(r.stdout, /No space left on device/);
  const size = Number(r.stdout.trim().split("\n").pop().split(/\s+/)[4]);
  assert.ok(size > 32 << 20 && size <= 64 << 20, `filled ${size} bytes`);
  const host1 = statfsSync(d.state);
  const used = free0 - host1.bavail * host1.bsize;
  assert.ok(used < 80 << 20, `host disk use grew by ${used} bytes`);
  // The file API says so too (402 cap_reached), and leaves nothing behind.
  const big = await c.data("diskfill", "PUT", `/files?path=${encodeURIComponent("/workspace/big")}`, randomBytes(8 << 20), true);
  assert.equal(big.status, 402, JSON.stringify(big.body));
  assert.equal((await c.sh("diskfill", "ls -A /workspace")).stdout, "disk-marker\nfill\n");
  // Deleting frees the space again.
  assert.equal((await c.sh("diskfill", "rm /workspace/fill && echo x > /workspace/after && cat /workspace/after")).stdout, "x\n");
  // tmpfs caps: size and inodes.
  const t = await c.sh("diskfill", "dd if=/dev/zero of=/tmp/fill bs=1M 2>&1; ls -l /tmp/fill; rm /tmp/fill");
  assert.match(t.stdout, /No space left on device/);
  assert.ok(Number(t.stdout.trim().split("\n").pop().split(/\s+/)[4]) <= 16 << 20);
  const s = await c.sh("diskfill", "dd if=/dev/zero of=/dev/shm/fill bs=1M 2>&1; rm /dev/shm/fill");
  assert.match(s.stdout, /No space left on device/);
  const inodes = await c.sh("diskfill", "mkdir /tmp/i && cd /tmp/i && i=0; while [ $i -lt 20000 ]; do touch f$i 2>/dev/null || break; i=$((i+1)); done; echo $i; cd /; rm -rf /tmp/i",
    { timeoutMs: 60000 });
  assert.ok(Number(inodes.stdout.trim()) < 20000, `created ${inodes.stdout.trim()} files in a 16M /tmp`);
});

test("500 double-forked orphans leave no zombie", async () => {
  // Room for all of them at once: a daemon with a larger pids limit.
  const dd = await new Daemon({ args: ["--network", "none", "--pids-limit", "4096", "--disk-limit", "0", "--pool-size", "0"] }).start();
  try {
    const cc = new Client(dd);
    const r = await cc.sh("orphans",
      "i=0; while [ $i -lt 500 ]; do ( sleep 0.1 & ) & i=$((i+1)); done; wait; echo spawned=$i; sleep 1.5; " +
      "n=0; z=0; for f in /proc/[0-9]*/stat; do read -r l < $f 2>/dev/null || continue; n=$((n+1)); " +
      "s=${l##*) }; case $s in Z*) z=$((z+1));; esac; done; echo procs=$n zombies=$z", { timeoutMs: 60000 });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /spawned=500\n/);
    assert.match(r.stdout, /zombies=0$/m);
    // Nor does the host see one in the sandbox's cgroup.
    const id = sandboxIds(dd).find((x) => pidsOf(dd, x).some((p) => existsSync(`/proc/${p}/root/workspace`) && comm(p) !== ""));
    const states = pidsOf(dd, id).map((p) => readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1][0]);
    assert.ok(!states.includes("Z"), `host sees zombies: ${states}`);
  } finally {
    await dd.destroy();
  }
});

test("the agent survives kill -9 1 and kill -9 -1", async () => {
  const bg = await c.data("killer", "POST", "/processes", { command: ["/bin/sleep", "1000"] });
  assert.equal(bg.status, 200);
  const r = await c.sh("killer", "kill -9 1; echo after-1=$?; kill -9 -1; echo after-all");
  assert.match(r.stdout, /after-1=0/);
  assert.equal((await c.exec("killer", ["/bin/echo", "still"])).stdout, "still\n");
  const l = await c.data("killer", "GET", `/processes/${bg.body.processId}`);
  assert.equal(l.body.state, "exited");
  // SIGSTOP to PID 1: the kernel drops it (ns); under gVisor PID 1 is the
  // guard, which it does stop, and only the workload's namespace waits
  // for its reaper: sandbox-init, outside it, runs the next command.
  const pid1 = "cut -d' ' -f3 /proc/1/stat; tr '\\0' '\\n' < /proc/1/cmdline | head -1";
  const stop = await c.sh("killer", `kill -STOP 1; sleep 0.2; ${pid1}`);
  assert.match(stop.stdout, GVISOR ? /^T\nsandbox-guard\n$/ : /^[SR]\nsandbox-init\n$/);
  assert.equal((await c.exec("killer", ["/bin/echo", "running"])).stdout, "running\n");
  await c.sh("killer", "kill -CONT 1");
  if (GVISOR) {
    // kill -9 1 ends the guard and its namespace (the shell too); the
    // next command gets a new guard, never sandbox-init.
    await c.sh("killer", "kill -9 1");
    assert.match((await c.sh("killer", pid1)).stdout, /^[SR]\nsandbox-guard\n$/);
  }
});

// ---- hostile layers ----

// The gvisor driver mounts a sandbox's files on the host (<dir>/root, the
// disk image on <dir>/disk) and pins its netns on <dir>/netns; a sandbox
// killed from outside keeps them until its next start unmounts them.
// Unmounted here as its stop would, so that the layer can be edited.
function gvisorUnmount(dir) {
  for (const m of ["root", "disk", "netns"])
    if (sh(`findmnt -n -o TARGET -M '${join(dir, m)}' || true`).trim()) sh(`umount -R '${join(dir, m)}'`);
}

// Run fn(upperDir) on a stopped sandbox's writable layer, wherever it lives.
function withUpper(dir, fn) {
  if (GVISOR) gvisorUnmount(dir);
  const img = join(dir, "disk.img");
  if (!existsSync(img)) return fn(join(dir, "upper"));
  // The previous run's loop device detaches as its last process exits.
  for (let i = 0; i < 100 && sh(`losetup -j '${img}'`).trim(); i++) execFileSync("sleep", ["0.05"]);
  const mnt = mkdtempSync(join(tmpdir(), "sbx-upper-"));
  sh(`mount -o loop '${img}' '${mnt}'`);
  try {
    return fn(join(mnt, "upper"));
  } finally {
    sh(`umount '${mnt}'`);
    rmSync(mnt, { recursive: true, force: true });
  }
}

function hostSnapshot() {
  const etc = readdirSync("/etc").sort();
  return {
    passwd: sha("/etc/passwd"),
    hosts: sha("/etc/hosts"),
    etc: etc.join(","),
    etcMtime: statSync("/etc").mtimeMs,
    passwdMtime: statSync("/etc/passwd").mtimeMs,
  };
}

async function killSandbox(d, id) {
  writeFileSync(join(cgroupBase(d).v2, `sb-${id}`, "cgroup.kill"), "1");
  await until(() => pidsOf(d, id).length === 0);
}

test("a hostile writable layer cannot make set-up or the daemon act on the host", async () => {
  const before = hostSnapshot();
  // Plain upper/ directories (no disk cap) and capped images, both.
  const dd = new Daemon({ args: ["--network", "none", "--disk-limit", "0", "--pool-size", "0"] });
  // The gvisor driver mounts nothing on /workspace (the ns class binds
  // it): a link there is the sandbox's own, resolved by its kernel inside
  // its tree (and by the file endpoints inside its root), so it starts.
  const variants = [
    { name: "plain-proc", link: ["proc", "/"], fails: true },
    { name: "plain-workspace", link: ["workspace", "/etc"], fails: !GVISOR, ws: true },
    { name: "plain-devnull", link: ["dev/null", "/etc/passwd"] },
    { name: "img-proc", link: ["proc", "/"], fails: true, image: true },
    { name: "img-dev", link: ["dev", "/etc"], fails: true, image: true },
    { name: "img-tmp", link: ["tmp", "/etc"], fails: true, image: true },
    { name: "img-workspace", link: ["workspace", "/etc"], fails: !GVISOR, image: true, ws: true },
    { name: "img-devnull", link: ["dev/null", "/etc/passwd"], image: true },
    { name: "img-resolv", link: ["etc/resolv.conf", "/etc/passwd"], image: true },
  ];
  try {
    await dd.start();
    let cc = new Client(dd);
    for (const v of variants.filter((x) => !x.image)) await cc.sh(v.name, `echo ${v.name} > /workspace/${v.name}`);
    dd.opts.args = ["--network", "nat", "--dns", "198.18.0.53", "--disk-limit", "64M", "--pool-size", "0"];
    await dd.restart();
    cc = new Client(dd);
    for (const v of variants.filter((x) => x.image)) await cc.sh(v.name, `echo ${v.name} > /workspace/${v.name}`);
    for (const v of variants) v.sb = findSandbox(dd, v.name);
    await dd.stop();
    for (const v of variants) {
      await killSandbox(dd, v.sb.id);
      withUpper(v.sb.dir, (upper) => {
        const [path, target] = v.link;
        const p = join(upper, path);
        mkdirSync(dirname(p), { recursive: true });
        rmSync(p, { recursive: true, force: true });
        symlinkSync(target, p);
      });
    }
    await dd.start();
    cc = new Client(dd);
    for (const v of variants) {
      const r = await cc.control("POST", `/v1/sandboxes/${v.name}/attach`, {});
      if (v.fails) {
        assert.equal(r.status, 502, `${v.name}: ${r.status} ${JSON.stringify(r.body)}`);
        assert.match(r.body.error.message, /symlink|escapes/, v.name);
        continue;
      }
      assert.equal(r.status, 200, `${v.name}: ${JSON.stringify(r.body)}`);
      cc.handles.set(v.name, r.body);
      const x = await cc.sh(v.name, "wc -c < /dev/null; test -c /dev/null && echo chr; cat /etc/resolv.conf 2>&1; ls /workspace");
      assert.match(x.stdout, /^0\nchr\n/, v.name);
      // /workspace -> /etc is the sandbox's own /etc (its image's group
      // file, not the host's), and the file API follows it inside too.
      if (v.ws) {
        assert.equal((await cc.sh(v.name, "readlink /workspace; cat /workspace/group")).stdout,
          `/etc\n${readFileSync(join(IMAGES, "tiny/rootfs/etc/group"), "utf8")}`, v.name);
        const g = await cc.data(v.name, "GET", `/files?path=${encodeURIComponent("/workspace/group")}`);
        assert.equal(g.status, 200, v.name);
        assert.notEqual(String(g.body), readFileSync("/etc/group", "utf8"), v.name);
      }
      // A symlink to /etc/passwd resolves to the sandbox's own file, never
      // the host's; set-up never follows it (the image keeps its own DNS).
      // The plain ones keep the network they were made with: none.
      assert.ok(!x.stdout.includes(readFileSync("/etc/passwd", "utf8")), v.name);
      if (v.name === "img-resolv" || !v.image) assert.doesNotMatch(x.stdout, /nameserver 198\.18\.0\.53/, v.name);
      else assert.match(x.stdout, /nameserver 198\.18\.0\.53\n/, v.name);
      // Files written through the API stay inside too.
      const w = await cc.data(v.name, "PUT", `/files?path=${encodeURIComponent("/dev/null")}`, "x", true);
      assert.notEqual(w.status, 500);
    }
  } finally {
    await dd.destroy();
  }
  assert.deepEqual(hostSnapshot(), before);
});

test("a hostile image cannot make set-up act on the host", async () => {
  const before = hostSnapshot();
  const images = mkdtempSync(join(tmpdir(), "sbx-images-"));
  try {
    const src = join(process.env.SANDBOXD_IMAGES || "/var/lib/sandboxd/images", "tiny");
    // The gvisor class mounts nothing on /workspace (see above): an image
    // with /workspace -> /etc starts, its link resolved inside.
    for (const [name, path, target] of [["evil-proc", "proc", "/"], ["evil-ws", "workspace", "/etc"], ["evil-tmp", "tmp", "../../../../etc"]]) {
      sh(`cp -a '${src}' '${join(images, name)}'`);
      const p = join(images, name, "rootfs", path);
      rmSync(p, { recursive: true, force: true });
      symlinkSync(target, p);
      const dd = await new Daemon({ image: name, args: ["--images", images, "--network", "none", "--pool-size", "0", "--disk-limit", "0"] }).start();
      try {
        const cc = new Client(dd);
        const r = await cc.control("POST", "/v1/sandboxes/evil/attach", {});
        if (GVISOR && name === "evil-ws") {
          assert.equal(r.status, 200, `${name}: ${JSON.stringify(r.body)}`);
          cc.handles.set("evil", r.body);
          assert.equal((await cc.sh("evil", "cat /workspace/group")).stdout,
            readFileSync(join(src, "rootfs/etc/group"), "utf8"));
          continue;
        }
        assert.equal(r.status, 502, `${name}: ${JSON.stringify(r.body)}`);
        assert.match(r.body.error.message, /symlink|escapes/);
      } finally {
        await dd.destroy();
      }
    }
  } finally {
    rmSync(images, { recursive: true, force: true });
  }
  assert.deepEqual(hostSnapshot(), before);
});

// ---- network ----

// A network namespace standing in for "the rest of the world": the host
// routes 10.0.0.1, 169.254.169.254 and 198.18.0.1 (/32 each) into it
// through a veth pair, and a TCP server there answers on every address.
const NETNS = `sbxtest-${process.pid}`;
const TVETH = `tsx${process.pid % 100000}`; // never sbd*/sbx*: those are the sandboxes'
const WORLD = ["10.0.0.1", "169.254.169.254", "198.18.0.1"];
const WORLD_PORT = 18080;
let world = null;

function worldUp() {
  const cmds = [
    `ip netns add ${NETNS}`,
    `ip link add ${TVETH} type veth peer name w0 netns ${NETNS}`,
    `ip addr add 198.19.254.1/30 dev ${TVETH}`,
    `ip link set ${TVETH} up`,
    `ip -n ${NETNS} addr add 198.19.254.2/30 dev w0`,
    `ip -n ${NETNS} link set w0 up`,
    `ip -n ${NETNS} link set lo up`,
    ...WORLD.map((a) => `ip -n ${NETNS} addr add ${a}/32 dev lo`),
    `ip -n ${NETNS} route add default via 198.19.254.1`,
    ...WORLD.map((a) => `ip route add ${a}/32 via 198.19.254.2 dev ${TVETH}`),
  ];
  for (const c of cmds) sh(c);
  // TCP answers; UDP datagrams are reported by source address.
  const server = `require("net").createServer((s) => s.end("world " + s.localAddress + "\\n")).listen(${WORLD_PORT}, "0.0.0.0", () => console.log("up"));
    require("dgram").createSocket("udp4").on("message", (m, r) => console.log("udp " + r.address)).bind(${WORLD_PORT}, "0.0.0.0");`;
  world = spawn("ip", ["netns", "exec", NETNS, process.execPath, "-e", server], { stdio: ["ignore", "pipe", "inherit"] });
  world.udp = [];
  return new Promise((res, rej) => {
    world.stdout.once("data", res);
    let partial = "";
    world.stdout.on("data", (b) => {
      const lines = (partial + b).split("\n");
      partial = lines.pop();
      world.udp.push(...lines.filter((l) => l.startsWith("udp ")).map((l) => l.slice(4)));
    });
    world.once("exit", (code) => rej(new Error(`world server exited ${code}`)));
  });
}

function worldDown() {
  if (world) world.kill("SIGKILL");
  for (const a of WORLD) try { sh(`ip route del ${a}/32 via 198.19.254.2 dev ${TVETH} 2>/dev/null`); } catch {}
  try { sh(`ip link del ${TVETH} 2>/dev/null`); } catch {}
  try { sh(`ip netns del ${NETNS} 2>/dev/null`); } catch {}
}

// Packets the host's reverse-path filter dropped (all interfaces).
function rpDrops() {
  const [keys, values] = readFileSync("/proc/net/netstat", "utf8").split("\n")
    .filter((l) => l.startsWith("TcpExt:")).map((l) => l.split(/\s+/));
  return Number(values[keys.indexOf("IPReversePathFilter")]);
}

function hostAddresses() {
  return sh("ip -4 -o addr show").split("\n").map((l) => l.split(/\s+/)[3]).filter(Boolean)
    .map((a) => a.split("/")[0]).filter((a) => !a.startsWith("127.") && a !== "198.19.254.1");
}

test("nat: the outside answers; the host, the daemon, private and metadata addresses and other sandboxes do not", async (t) => {
  const defaultRoute = sh("ip route show default");
  const resolv = readFileSync("/etc/resolv.conf");
  t.after(worldDown);
  await worldUp();
  // A host server on every host address, and the daemon itself.
  const hostSrv = net.createServer((s) => s.end("host\n"));
  await new Promise((r) => hostSrv.listen(0, "0.0.0.0", r));
  t.after(() => hostSrv.close());
  const hostPort = hostSrv.address().port;
  const dd = await new Daemon({ env: CANARY_ENV, args: ["--network", "nat", "--dns", "198.18.0.53", "--pool-size", "0", "--disk-limit", "64M"] }).start();
  try {
    const cc = new Client(dd);
    // Another sandbox with a listener: unreachable from the first.
    const other = await cc.data("other", "POST", "/processes", { command: ["/bin/sh", "-c", "while :; do echo other | nc -l -p 18081; done"] });
    assert.equal(other.status, 200);
    const otherAddr = (await cc.sh("other", "ip -4 -o addr show eth0")).stdout.split(/\s+/)[3].split("/")[0];
    // The host end of the pair: eth0's peer (ns); gVisor's sysfs has no
    // iflink, there it is the interface that holds the gateway address.
    const route = (await cc.sh("a", `ip route show default; ${GVISOR ? "" : "cat /sys/class/net/eth0/iflink"}`)).stdout;
    const gw = route.match(/default via (\S+)/)[1];
    const hostIfindex = GVISOR ? sh(`ip -o -4 addr show`).match(new RegExp(`^(\\d+): \\S+ +inet ${gw.replace(/\./g, "\\.")}/`, "m"))[1]
      : route.trim().split("\n").pop();
    // In this daemon's own range (auto: a free block of 10.200.0.0/14).
    const range = readFileSync(join(dd.state, "ranges"), "utf8").match(/^net_range (\S+)$/m)[1];
    const [rnet, rlen] = range.split("/");
    const v4 = (a) => a.split(".").reduce((x, y) => x * 256 + Number(y), 0);
    assert.ok(v4(gw) >= v4(rnet) && v4(gw) < v4(rnet) + 2 ** (32 - Number(rlen)), `${gw} in ${range}`);
    assert.match(range, /^10\.20[0-3]\./);
    // The outside: reachable, masqueraded.
    const ok = await cc.sh("a", `nc -w 3 198.18.0.1 ${WORLD_PORT} </dev/null`);
    assert.equal(ok.stdout, "world 198.18.0.1\n", ok.stderr);
    // Everything else: not.
    const targets = [
      `10.0.0.1:${WORLD_PORT}`, `169.254.169.254:${WORLD_PORT}`, `169.254.169.254:80`,
      // A network the host is directly attached to (its "LAN"), public or not.
      `198.19.254.2:${WORLD_PORT}`,
      `${gw}:${hostPort}`, `${gw}:${dd.port}`, `127.0.0.1:${dd.port}`,
      ...hostAddresses().flatMap((a) => [`${a}:${hostPort}`, `${a}:${dd.port}`, `${a}:22`]),
      `${otherAddr}:18081`,
    ];
    await installProbe(cc, "a");
    const checks = await runProbe(cc, "a", [`--canary=${CANARY_VALUE}`, ...targets.map((x) => `--connect=${x}`)]);
    assertNothingReached(checks, ["connect", "posture", "packet_netlink_sockets"]);
    // The sandbox's DNS is the configured one, read-only.
    const dns = await cc.sh("a", "cat /etc/resolv.conf; echo x >> /etc/resolv.conf && echo writable");
    assert.equal(dns.stdout, "nameserver 198.18.0.53\n");
    // No IPv6 anywhere but loopback.
    assert.equal((await cc.sh("a", "ip -6 -o addr show | grep -v ' lo ' | wc -l")).stdout.trim(), "0");
    // Its own address is the only source that gets out (masqueraded to
    // the host's). Root of a user namespace of its own can give gVisor's
    // network stack more addresses (gVisor checks CAP_NET_ADMIN in the
    // caller's user namespace); the ns class has no user namespaces. The
    // host drops what the sandbox sends from them: strict reverse-path
    // filtering and the table's source check.
    const own = (await cc.sh("a", "ip -4 -o addr show eth0")).stdout.split(/\s+/)[3].split("/")[0];
    const udp = (from) => cc.sh("a", `/workspace/probe udp ${from} 198.18.0.1 ${WORLD_PORT} 5`);
    assert.equal((await udp(own)).stdout, "sent 5\n");
    await until(() => world.udp.length >= 3, 5000);
    const masq = new Set(world.udp);
    assert.deepEqual([...masq], ["198.19.254.1"], `the world saw ${world.udp}`);
    const spoof = ["192.0.2.7", otherAddr];
    const add = await cc.sh("a", spoof.map((a) => `/workspace/probe userns /bin/ip addr add ${a}/32 dev eth0`).join(" && "));
    if (GVISOR) {
      assert.equal(add.exitCode, 0, add.stderr);
      // They do leave the sandbox (the host end receives them) and the
      // host's reverse-path filter drops them.
      const hostEnd = sh("ip -o link").match(new RegExp(`^${hostIfindex}: ([^:@]+)`, "m"))[1];
      const rx = () => Number(readFileSync(`/sys/class/net/${hostEnd}/statistics/rx_packets`, "utf8"));
      const before = world.udp.length, rx0 = rx(), rp0 = rpDrops();
      for (const a of spoof) assert.equal((await udp(a)).stdout, "sent 5\n", a);
      await sleep(500);
      assert.deepEqual(world.udp.slice(before), [], `spoofed datagrams got out: ${world.udp.slice(before)}`);
      assert.ok(rx() - rx0 >= 10, `the host end got ${rx() - rx0} packets`);
      assert.ok(rpDrops() - rp0 >= 10, `the host's reverse-path filter dropped ${rpDrops() - rp0}`);
    } else {
      assert.notEqual(add.exitCode, 0);
      assert.match(add.stderr, /unshare\(CLONE_NEWUSER\): Operation not permitted/);
    }
    // The host end of the pair goes away with the sandbox.
    assert.match(sh("ip -o link"), new RegExp(`^${hostIfindex}: sbd${readFileSync(join(dd.state, "instance-id"), "utf8").slice(0, 6)}`, "m"));
    assert.equal((await cc.control("DELETE", "/v1/sandboxes/a")).status, 204);
    await until(() => !new RegExp(`^${hostIfindex}: `, "m").test(sh("ip -o link")));
  } finally {
    await dd.destroy();
  }
  assert.equal(sh("ip route show default"), defaultRoute);
  assert.ok(readFileSync("/etc/resolv.conf").equals(resolv));
});

test("network none: loopback only", async () => {
  await c.attach("nonet");
  // gVisor's sysfs has no class/net; its network stack lists its
  // interfaces in /proc/net/dev.
  const list = GVISOR ? "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '" : "ls /sys/class/net";
  const r = await c.sh("nonet", `${list}; ip route; nc -w 1 198.18.0.1 80 </dev/null; echo rc=$?`);
  assert.match(r.stdout, /^lo\n/);
  assert.doesNotMatch(r.stdout, /eth0|default/);
});

test("dns refuses private and local resolvers", async () => {
  for (const dns of ["10.0.0.53", "127.0.0.53", "169.254.169.254"]) {
    const dd = new Daemon({ args: ["--network", "nat", "--dns", dns, "--pool-size", "0"] });
    await assert.rejects(dd.start(), /private or local/);
    rmSync(dd.state, { recursive: true, force: true });
  }
});

// A one-name DNS server on loopback: A 198.18.0.53 for probe.sandboxd.test,
// NXDOMAIN for anything else; counts the queries it got.

const fakeDns = () => resolver({ answers: (n) => n === "probe.sandboxd.test" });

test("nat: the daemon forwards DNS to the host's resolvers; the sandbox reaches no resolver itself", async () => {
  const up = await fakeDns();
  const dnsPort = 20000 + (process.pid % 20000);
  const dd = await new Daemon({ args: ["--network", "nat", "--pool-size", "0", "--dns-port", String(dnsPort),
    "--dns-upstream", `127.0.0.1:${up.port}`] }).start();
  try {
    const cc = new Client(dd);
    const r = await cc.sh("dns", "cat /etc/resolv.conf; nslookup probe.sandboxd.test; nslookup nope.sandboxd.test; echo rc=$?");
    // The first address of the daemon's range (auto: a block of 10.200.0.0/14).
    const vip = r.stdout.match(/^nameserver (10\.20[0-3]\.\d+\.1)$/m)?.[1];
    assert.ok(vip, r.stdout);
    assert.match(r.stdout, /Address:? *198\.18\.0\.53/);
    assert.ok(up.seen.includes("probe.sandboxd.test"), `upstream saw ${up.seen}`);
    // The forwarder listens only for redirected queries from sandboxes:
    // its port on the host's side is closed to them.
    const direct = await cc.sh("dns", `nslookup -port=${dnsPort} probe.sandboxd.test ${vip} 2>&1; echo rc=$?`);
    assert.doesNotMatch(direct.stdout, /198\.18\.0\.53/);
  } finally {
    await dd.destroy();
    up.close();
  }
});

// Opt-in (the only test that needs the internet). SANDBOXD_TEST_CA names a
// CA file to trust inside the sandbox, for hosts whose egress goes through
// an intercepting proxy.
test("npm install works under nat", { skip: process.env.SANDBOXD_TEST_INTERNET !== "1" ? "set SANDBOXD_TEST_INTERNET=1" : !HAVE_DEBIAN && "debian image not built" }, async () => {
  const dns = process.env.SANDBOXD_TEST_DNS;
  const ca = process.env.SANDBOXD_TEST_CA;
  const dd = await new Daemon({ image: "debian", args: ["--network", "nat", ...(dns ? ["--dns", dns] : []), "--pool-size", "0"] }).start();
  try {
    const cc = new Client(dd);
    let env = "";
    if (ca) {
      await put(cc, "npm", "/workspace/extra-ca.crt", readFileSync(ca));
      env = "NODE_EXTRA_CA_CERTS=/workspace/extra-ca.crt ";
    }
    const r = await cc.sh("npm", `cd /workspace && ${env}npm install --no-audit --no-fund is-number 2>&1 && node -e 'console.log(require("is-number")(5))'`, { timeoutMs: 180000 });
    assert.equal(r.exitCode, 0, r.stdout);
    assert.match(r.stdout, /true\n$/);
  } finally {
    await dd.destroy();
  }
});
