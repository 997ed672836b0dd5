"""The frozen evaluation sets of MAPF-FrozenLake and how their results are read.

- `heldout`: the shipped splits (`load_split`: `heldout` for the numbers we publish,
  `validation` for anything that tunes an engineer or a choice rule), with checksums;
- `build`: the builder (numpy RNG + CBS, independent of the training generator);
- `report`: the paper's table (valid % / optimal % by agents x size x wait-ratio subset);
- `validator`: a split, an env to play it and the reading of its results (`load_validator`);
- `failures`: failed episodes as text.
"""

from jaxenv.mapf.benchmark.heldout import SPLITS, load_heldout, load_split
from jaxenv.mapf.benchmark.report import Table, format_markdown, format_text, make_table

__all__ = ["SPLITS", "Table", "format_markdown", "format_text", "load_heldout", "load_split",
           "make_table"]
