"""exec: exit codes, output, env, cwd, deadlines, the 1 MiB cap; exec_combined."""

from __future__ import annotations

from sandboxd import ExecResult


def test_exit_codes_and_output(client, sandbox):
    r = client.exec(sandbox, ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
    assert isinstance(r, ExecResult)
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert r.timed_out is False and r.truncated is False
    assert r.duration_ms >= 0
    assert client.exec(sandbox, ["true"]).exit_code == 0
    assert client.exec(sandbox, ["/bin/sh", "-c", "exit 255"]).exit_code == 255


def test_a_nonzero_exit_is_a_result_not_an_exception(client, sandbox):
    r = client.exec(sandbox, ["false"])
    assert r.exit_code == 1


def test_argv_is_not_a_shell_line(client, sandbox):
    r = client.exec(sandbox, ["echo", "$HOME", "a  b", "*"])
    assert r.stdout == "$HOME a  b *\n"


def test_env_and_cwd(client, sandbox):
    r = client.exec(sandbox, ["/bin/sh", "-c", 'echo "$GREETING"; pwd'], env={"GREETING": "hi there"})
    assert r.stdout == "hi there\n/workspace\n"
    r = client.exec(sandbox, ["pwd"], cwd="/tmp")
    assert r.stdout.strip() == "/tmp"


def test_commands_run_in_workspace_and_files_persist(client, sandbox):
    client.exec(sandbox, ["/bin/sh", "-c", "echo kept > persisted.txt"])
    assert client.exec(sandbox, ["cat", "/workspace/persisted.txt"]).stdout == "kept\n"


def test_timeout_kills_the_command(client, sandbox):
    r = client.exec(sandbox, ["sleep", "30"], timeout_ms=300)
    assert r.timed_out is True
    assert r.exit_code != 0


def test_output_over_1_mib_is_truncated(client, sandbox):
    r = client.exec(sandbox, ["/bin/sh", "-c", "head -c 1200000 /dev/zero | tr '\\0' x"])
    assert r.truncated is True
    assert len(r.stdout) == 1024 * 1024
    assert set(r.stdout) == {"x"}


def test_utf8_output(client, sandbox):
    r = client.exec(sandbox, ["printf", "gr\u00fc\u00df dich \u2713\n"])
    assert r.stdout == "gr\u00fc\u00df dich \u2713\n"


def test_exec_combined_interleaves_stderr(client, sandbox):
    r = client.exec_combined(sandbox, "echo one; echo two >&2; echo three; exit 4")
    assert r.output == "one\ntwo\nthree\n"
    assert r.exit_code == 4
    assert r.truncated is False


def test_command_must_be_argv(client, sandbox):
    import pytest

    with pytest.raises(TypeError):
        client.exec(sandbox, "echo hi")  # type: ignore[arg-type]


def test_user(client, sandbox):
    r = client.exec(sandbox, ["id", "-u"], user="1000")
    assert (r.exit_code, r.stdout) == (0, "1000\n")
    assert client.exec(sandbox, ["id", "-u"]).stdout == "0\n"


def test_threads_share_one_client_and_one_attach(token):
    from concurrent.futures import ThreadPoolExecutor

    from conftest import Spy, unique
    from sandboxd import SandboxClient

    name = unique("threads")
    with SandboxClient(token=token) as c:
        spy = Spy(c)
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda i: c.exec(name, ["/bin/sh", "-c", f"echo {i}"]), range(12)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(12)]
        assert spy.attaches == 1, "concurrent first calls share one attach"
        c.delete(name)
