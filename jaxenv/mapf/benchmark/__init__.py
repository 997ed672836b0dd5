"""The frozen evaluation sets of MAPF-FrozenLake and how their results are read.

- `heldout`: the shipped sets (`load_heldout`), with checksums;
- `build`: the builder (numpy RNG + CBS, independent of the training generator);
- `report`: the paper's table (valid % / optimal % by agents x size x wait-ratio subset).
"""

from jaxenv.mapf.benchmark.heldout import load_heldout
from jaxenv.mapf.benchmark.report import Table, format_markdown, format_text, make_table

__all__ = ["Table", "format_markdown", "format_text", "load_heldout", "make_table"]
