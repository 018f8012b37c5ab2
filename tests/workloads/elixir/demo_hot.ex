# Demo.Hot - an Elixir workload (tests/acceptance/test_names.py).
#
#   Demo.Hot.start()   spawns a process registered as Demo.Hot that runs
#                      loop/1 forever: most of its time in spin/1 (a busy
#                      countdown, called from loop/1, which stays on the
#                      stack), the rest summing a range with Enum.reduce/3
#                      and an anonymous function ("anonymous fn/2 in
#                      Demo.Hot.loop/1").  Returns the pid.
#   Demo.Hot.stop()    kills it.
#
# Compiled with Debian's elixirc; runs on the stock OTP 25 VM with
# Elixir's ebin directories on the code path.
defmodule Demo.Hot do
  def start do
    stop()
    pid = spawn(__MODULE__, :run, [])
    Process.register(pid, __MODULE__)
    pid
  end

  def stop do
    case Process.whereis(__MODULE__) do
      nil ->
        :ok

      pid ->
        Process.exit(pid, :kill)
        :ok
    end
  end

  def run, do: loop(1)

  def loop(n) do
    x = spin(400_000)
    y = Enum.reduce(1..20_000, 0, fn i, acc -> acc + rem(i * n, 7) end)
    loop(rem(n + x + y, 1000) + 1)
  end

  def spin(0), do: 0
  def spin(k), do: spin(k - 1)
end
