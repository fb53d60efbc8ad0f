"""The Python module against the command line: run(), sweep() and plan() must hand back what
`stepsim run --json`, `stepsim sweep` (its CSV) and `stepsim plan --json` write, bad input must
raise stepsim.InputError with the CLI's messages, and without pandas the tables come as lists of
dicts. Run by ctest from the repository root: test_stepsim_module.py PATH_TO_STEPSIM_CLI."""

import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import stepsim

CLI = sys.argv.pop(1) if len(sys.argv) > 1 else "build/release/stepsim"
SMALL = "configs/scenarios/gpt-1.3b-gpipe-16.json"  # about 0.05 s a simulation
try:
    import pandas
except ImportError:
    pandas = None


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True)


def cli_report(*args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        done = cli("run", *args, "--json", out, "-q")
        assert done.returncode == 0, done.stderr
        with open(out) as f:
            return json.load(f)


def cli_errors(*args):
    """The lines the CLI prints for bad input, without their "error: "."""
    done = cli(*args)
    assert done.returncode == 2, (done.returncode, done.stderr)
    return [line[len("error: "):] for line in done.stderr.splitlines() if line.startswith("error: ")]


def sweep_document():
    # Two schedules × two tensor degrees; tensor 3 does not divide the 16 heads, so two points are
    # infeasible rows with their reason (a text with commas and quotes in the CSV).
    return {
        "name": "python-module-test",
        "base": os.path.abspath(SMALL),
        "set": {"training.micro_batch_size": 1},
        "grid": {"parallelism.schedule": ["gpipe", "1f1b"], "parallelism.tensor": [2, 3]},
    }


def cli_sweep_csv(tmp, document):
    path = os.path.join(tmp, "sweep.json")
    with open(path, "w") as f:
        json.dump(document, f)
    done = cli("sweep", path, "-j", "2", "-o", os.path.join(tmp, "out"), "-q")
    assert done.returncode == 0, done.stderr
    return os.path.join(tmp, "out.csv")


def matches_cell(text, value):
    """Whether a record's value is the CSV cell `text`, typed as read_csv types it."""
    if text == "":
        return value is None
    if isinstance(value, bool):
        return text.lower() == str(value).lower()
    if isinstance(value, int):
        return int(text) == value
    if isinstance(value, float):
        return math.isnan(value) if math.isnan(float(text)) else float(text) == value
    return text == value


class Run(unittest.TestCase):
    def test_a_path_gives_the_cli_report(self):
        report = stepsim.run("configs/scenarios/gpt-7b-64.json")
        expected = cli_report("configs/scenarios/gpt-7b-64.json")
        self.assertEqual(report["step_time_s"], expected["step_time_s"])
        self.assertEqual(report, expected)
        print(f"\ngpt-7b-64 step_time_s: module {report['step_time_s']!r}, CLI {expected['step_time_s']!r}")

    def test_a_dict_with_set_gives_the_cli_report_with_set(self):
        with open(SMALL) as f:
            document = json.load(f)
        expected = cli_report(SMALL, "--set", "parallelism.schedule=1f1b", "--set", "training.micro_batch_size=1")
        self.assertEqual(stepsim.run(document, set={"parallelism.schedule": "1f1b", "training.micro_batch_size": 1}),
                         expected)
        self.assertEqual(stepsim.run(document, set=["parallelism.schedule=1f1b", "training.micro_batch_size=1"]),
                         expected)
        self.assertNotEqual(stepsim.run(document)["step_time_s"], expected["step_time_s"])

    def test_allow_oom_and_links_are_the_cli_flags(self):
        big = ["training.micro_batch_size=64", "training.recompute=none", "training.global_batch_size=2048"]
        sets = [arg for a in big for arg in ("--set", a)]
        # Memory is checked in the simulation's child: its InputError comes back to this process.
        with self.assertRaises(stepsim.InputError) as caught:
            stepsim.run("configs/scenarios/gpt-7b-64.json", set=big)
        self.assertEqual(caught.exception.problems, cli_errors("run", "configs/scenarios/gpt-7b-64.json", *sets))
        self.assertEqual(stepsim.run("configs/scenarios/gpt-7b-64.json", set=big, allow_oom=True),
                         cli_report("configs/scenarios/gpt-7b-64.json", *sets, "--allow-oom"))
        self.assertEqual(stepsim.run(SMALL, links=5), cli_report(SMALL, "--links", "5"))

    def test_runs_many_times_in_one_process(self):
        first = stepsim.run(SMALL)
        for _ in range(3):
            self.assertEqual(stepsim.run(SMALL), first)

    def test_other_threads_run_while_it_simulates(self):
        ticks = []
        stop = threading.Event()

        def count():
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.001)

        thread = threading.Thread(target=count)
        thread.start()
        time.sleep(0.01)
        before = len(ticks)
        stepsim.run("configs/scenarios/llama3-405b-16k.json")  # about 0.4 s
        during = len(ticks) - before
        stop.set()
        thread.join()
        self.assertGreater(during, 20)  # with the GIL held, the counter would stand still


class Sweep(unittest.TestCase):
    def test_the_table_is_the_cli_csv(self):
        with tempfile.TemporaryDirectory() as tmp:
            csv_path = cli_sweep_csv(tmp, sweep_document())
            table = stepsim.sweep(sweep_document(), jobs=2)
            from_file = stepsim.sweep(os.path.join(tmp, "sweep.json"), jobs=2)
            with open(csv_path, newline="") as f:
                rows = list(csv.reader(f))
            if pandas is not None:
                expected = pandas.read_csv(csv_path)
                pandas.testing.assert_frame_equal(table, expected, check_exact=True)
                pandas.testing.assert_frame_equal(from_file, expected, check_exact=True)
                self.assertEqual(list(table.columns), rows[0])
                self.assertEqual(list(table["status"]), ["ok", "infeasible", "ok", "infeasible"])
            else:
                self.assertEqual(table, from_file)
                check_records(self, table, rows)
            print(f"\nsweep: {len(rows) - 1} rows x {len(rows[0])} columns equal the CLI's CSV")


class Plan(unittest.TestCase):
    def test_rows_are_the_cli_configurations(self):
        table = stepsim.plan(SMALL, simulate=4, top=3, jobs=2)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "plan.json")
            done = cli("plan", SMALL, "--simulate", "4", "--top", "3", "-j", "2", "-q", "--json", out)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out) as f:
                expected = json.load(f)
        rows = table.to_dict("records") if pandas is not None else table
        self.assertEqual(len(rows), 3)
        for rank, (row, cli_row) in enumerate(zip(rows, expected), start=1):
            self.assertEqual(row["rank"], rank)
            for path, value in cli_row["settings"].items():
                self.assertEqual(row[path], value, path)
            self.assertEqual(row["step_time_s"], cli_row["report"]["step_time_s"])
            self.assertEqual(row["tokens_per_s"], cli_row["report"]["tokens_per_s"])


class BadInput(unittest.TestCase):
    def test_raises_input_error_with_the_cli_message(self):
        with self.assertRaises(stepsim.InputError) as caught:
            stepsim.run(SMALL, set={"parallelism.tensor": 3})
        error = caught.exception
        self.assertIsInstance(error, ValueError)
        expected = cli_errors("run", SMALL, "--set", "parallelism.tensor=3")
        self.assertEqual(error.problems, expected)
        self.assertEqual(str(error), "\n".join(expected))
        self.assertIn("parallelism.tensor", str(error))

    def test_a_dict_names_the_json_path(self):
        with open(SMALL) as f:
            document = json.load(f)
        document["training"]["micro_batch_sise"] = 2
        with self.assertRaises(stepsim.InputError) as caught:
            stepsim.run(document)
        self.assertIn("training.micro_batch_sise", str(caught.exception))

    def test_sweep_and_plan_raise_it_too(self):
        document = sweep_document()
        document["grid"]["parallelism.tensr"] = [1]
        with self.assertRaises(stepsim.InputError) as caught:
            stepsim.sweep(document)
        self.assertIn("grid.parallelism.tensr", str(caught.exception))
        with self.assertRaises(stepsim.InputError) as caught:
            stepsim.plan(SMALL, headroom="lots")
        self.assertEqual(caught.exception.problems, cli_errors("plan", SMALL, "--headroom", "lots"))
        with self.assertRaises(stepsim.InputError):
            stepsim.run("configs/scenarios/no-such-file.json")


def check_records(test, records, rows):
    """`records` (list of dicts) against the CLI's CSV `rows` (header first)."""
    test.assertIsInstance(records, list)
    test.assertEqual(len(records), len(rows) - 1)
    for record, row in zip(records, rows[1:]):
        test.assertEqual(list(record), rows[0])
        for column, text in zip(rows[0], row):
            test.assertTrue(matches_cell(text, record[column]), (column, text, record[column]))


class WithoutPandas(unittest.TestCase):
    def test_tables_are_lists_of_dicts(self):
        script = (
            "import sys, json; sys.modules['pandas'] = None\n"
            "import stepsim\n"
            f"sweep = stepsim.sweep(json.loads({json.dumps(json.dumps(sweep_document()))}), jobs=2)\n"
            f"plan = stepsim.plan({SMALL!r}, simulate=2, top=2)\n"
            "print(json.dumps({'sweep': sweep, 'plan': plan}))\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        result = json.loads(done.stdout)
        with tempfile.TemporaryDirectory() as tmp:
            with open(cli_sweep_csv(tmp, sweep_document()), newline="") as f:
                rows = list(csv.reader(f))
        check_records(self, result["sweep"], rows)
        self.assertEqual([row["rank"] for row in result["plan"]], [1, 2])


if __name__ == "__main__":
    start = time.monotonic()
    outcome = unittest.main(verbosity=2, exit=False).result
    print(f"python module tests: {time.monotonic() - start:.1f} s")
    sys.exit(0 if outcome.wasSuccessful() else 1)
