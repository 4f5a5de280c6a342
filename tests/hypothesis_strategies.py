"""Shared hypothesis generators: node names (with ':', '#', unicode), weights, keys, spaces."""

from __future__ import annotations

from hypothesis import strategies as st

# Names with the characters that break naive vnode labels: '#', ':', digits, non-ASCII.
node_names = st.text(alphabet=st.sampled_from("abcxyz019#:-_é☃"), min_size=1, max_size=8)
node_name_sets = st.lists(node_names, min_size=1, max_size=8, unique=True)
weights = st.floats(min_value=0.05, max_value=4.0, allow_nan=False, allow_infinity=False)
keys = st.one_of(
    st.text(max_size=20),
    st.binary(max_size=20),
    st.integers(min_value=-(2**70), max_value=2**70),
)
key_lists = st.lists(keys, min_size=1, max_size=60)
small_vnodes = st.integers(min_value=1, max_value=24)


@st.composite
def token_layouts(draw: st.DrawFn, max_nodes: int = 6) -> tuple[dict[str, list[int]], int]:
    """Draw explicit tokens in a small space: ({name: tokens}, space), every point enumerable."""
    space = draw(st.integers(min_value=8, max_value=400))
    names = draw(st.lists(node_names, min_size=1, max_size=max_nodes, unique=True))
    layout = {
        name: draw(st.lists(st.integers(0, space - 1), min_size=1, max_size=4, unique=True))
        for name in names
    }
    return layout, space
