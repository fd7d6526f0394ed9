"""Samples files: ids and lengths, one step or several; bad lines named."""

import pytest

from hydraulis.artifacts.samples import read_sample_steps
from hydraulis.base.errors import HydraulisError


def test_a_lengths_file_is_one_step_with_positions_as_ids(tmp_path):
    path = tmp_path / "batch.txt"
    path.write_text("# a batch\n10\n20\n\n30\n")
    (step,) = read_sample_steps(path)
    assert step.ids == (0, 1, 2) and step.lengths == (10, 20, 30)


def test_tab_separated_ids_and_steps(tmp_path):
    path = tmp_path / "batch.txt"
    path.write_text("a\t10\nb\t20\n")
    (step,) = read_sample_steps(path)
    assert step.ids == ("a", "b") and step.lengths == (10, 20)
    path = tmp_path / "steps.tsv"
    path.write_text("1\tz\t5\n0\ta\t10\n1\ty\t6\n")
    first, second = read_sample_steps(path)
    assert (first.ids, second.ids, second.lengths) == (("a",), ("z", "y"), (5, 6))


def test_json_lines_keep_the_ids_type(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_text('{"id": 7, "length": 10}\n\n{"id": "x", "length": 3, "step": 2}\n')
    first, second = read_sample_steps(path)
    assert first.ids == (7,) and second.ids == ("x",) and second.lengths == (3,)


@pytest.mark.parametrize("name, text, message", [
    ("a.tsv", "a\t10\nb\tten\n", "a.tsv:2 length: 'ten' is not an integer"),
    ("a.tsv", "a\t10\t3\t4\n", "a.tsv:1: 'a\\t10\\t3\\t4' must be id<TAB>length"),
    ("a.tsv", "-1\ta\t10\n", "a.tsv:1 step: '-1' must be an integer >= 0"),
    ("a.tsv", "a\t10\na\t20\n", "samples[1].id: 'a' repeats an id of this step"),
    ("a.jsonl", '{"id": 1}\n', 'a.jsonl:1: \'{"id": 1}\' must be an object with "id" and "length"'),
    ("a.jsonl", '{"id": 1, "length": 0}\n', "a.jsonl:1.length: 0 must be between 1"),
    ("a.jsonl", '{"id": 1, "length": 5, "when": 2}\n', "a.jsonl:1: ['when'] are unknown keys"),
    ("a.jsonl", '{"id": true, "length": 5}\n', "samples[0].id: True must be a string or an integer"),
    ("a.jsonl", "", "lengths: "),
])
def test_bad_lines_are_named(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(HydraulisError) as error:
        read_sample_steps(path)
    assert str(error.value).startswith(message)
