"""Random access in one hop: ``Client.take`` learns the slice map once and asks
the nodes directly with tickets it builds under the head's read grant
(kind 04, docs/protocol.md "Slice map")."""

from __future__ import annotations

import struct
import threading
import time

import numpy as np
import piece_util
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from iceberg_util import Warehouse
from test_metrics import scrape, scrape_nodes, total

import icefloe
from icefloe.errors import map_error

N = 20_000


def _data(scale: int) -> pa.Table:
    rng = np.random.default_rng(scale)
    return pa.table({"id": np.arange(N, dtype=np.int64) * scale,
                     "x": rng.standard_normal(N).astype(np.float32),
                     "name": pa.array([f"r{i}" for i in range(N)])})


def _create(wh: Warehouse, name: str, data: pa.Table, files: int = 4):
    """An Iceberg table of several data files (so its rows spread over nodes)."""
    per = len(data) // files
    table = wh.create(name, data.slice(0, per))
    for i in range(1, files):
        table.append(data.slice(i * per, per if i < files - 1 else None))
    return table


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("onehop") / "wh")
    bigger = pa.concat_tables([_data(1), _data(1)])
    return _create(wh, "t", _data(1)), _create(wh, "t2", _data(7)), _create(wh, "t3", bigger)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, tables):
    root = tmp_path_factory.mktemp("onehop-cluster")
    with icefloe.LocalCluster(num_nodes=2, log_dir=root / "logs") as c:
        with c.client() as client:
            # Small batches: many slices, placed on both nodes.
            client.load("t", tables[0].metadata_location, batch_rows=1000)
        yield c


def _ids(rng, n: int) -> list[int]:
    ids = rng.integers(0, N, size=n).tolist()
    if n > 1:
        ids[-1] = ids[0]  # a duplicate, whatever the draw
    return ids


def test_take_equals_in_process_take(cluster):
    rng = np.random.default_rng(3)
    with cluster.client() as client:
        whole = client.read("t")
        nodes = {n for s in client.slice_map("t")["slices"] for n in s["nodes"]}
        assert len(nodes) == 2, "the rows should be spread over both nodes"
        for n in (1, 64, 4096):
            ids = _ids(rng, n)
            got = client.take("t", ids)
            assert got.equals(whole.take(ids)), n
        # numpy arrays, descending order, one row many times.
        ids = np.array([N - 1, 5, 5, 5, 0, N // 2], dtype=np.int64)
        assert client.take("t", ids).equals(whole.take(ids))
        assert client.take("t", []).num_rows == 0


def test_takes_after_the_first_do_not_ask_the_head(cluster):
    rng = np.random.default_rng(4)
    with cluster.client() as client:
        client.take("t", [0])  # learns the map
        before = scrape(cluster.head.health)
        for _ in range(20):
            client.take("t", _ids(rng, 64))
        after = scrape(cluster.head.health)
    assert total(after, "icefloe_head_flight_info_total") == \
        total(before, "icefloe_head_flight_info_total")
    assert total(after, "icefloe_head_slice_maps_total") == \
        total(before, "icefloe_head_slice_maps_total")


def test_projected_takes_go_in_one_hop_with_only_those_columns(cluster):
    """``take(columns=)``: the grant names the columns (signed), the nodes send
    only those, and further takes of that column set ask the head nothing."""
    rng = np.random.default_rng(5)
    # Over the wire, whose bytes are counted (a reader of shared memory takes
    # rows from the nodes' files: test_shared_memory.py).
    with cluster.client(share_memory=False) as client:
        whole = client.read("t")
        client.take("t", [0], columns=["x", "id"])  # learns the projected map
        before = scrape(cluster.head.health)
        served0 = sum(total(s, "icefloe_node_served_bytes_total") for s in scrape_nodes(cluster))
        for _ in range(5):
            ids = _ids(rng, 512)
            got = client.take("t", ids, columns=["x", "id"])
            assert got.schema.names == ["x", "id"]
            assert got.equals(whole.take(ids).select(["x", "id"]))
        served = sum(total(s, "icefloe_node_served_bytes_total")
                     for s in scrape_nodes(cluster)) - served0
        after = scrape(cluster.head.health)
        assert client.take("t", [], columns=["name"]).schema.names == ["name"]
        with pytest.raises(icefloe.InvalidArgument, match="nope"):
            client.take("t", [1], columns=["nope"])
    assert total(after, "icefloe_head_flight_info_total") == \
        total(before, "icefloe_head_flight_info_total")
    assert total(after, "icefloe_head_slice_maps_total") == \
        total(before, "icefloe_head_slice_maps_total")
    # 12 bytes a row of x and id; the strings never crossed the wire.
    assert 5 * 512 * 12 <= served < 5 * 512 * 12 * 2


def test_rows_outside_are_refused_before_any_node_is_asked(cluster):
    with cluster.client() as client:
        client.take("t", [0])
        before = sum(total(s, "icefloe_node_doget_streams_total") for s in scrape_nodes(cluster))
        for bad in ([3, N], [-1], [0, 2**63]):
            with pytest.raises(icefloe.InvalidArgument, match=f"= {bad[-1]} is outside"):
                client.take("t", bad)
        with pytest.raises(icefloe.InvalidArgument, match=r"'rows'\[1\] must be an integer"):
            client.take("t", [1, 2.5])
        after = sum(total(s, "icefloe_node_doget_streams_total") for s in scrape_nodes(cluster))
    assert after == before


def _do_get(client: icefloe.Client, uri: str, ticket: bytes) -> pa.Table:
    try:
        return client.node(uri).do_get(flight.Ticket(ticket),
                                       options=client.call_options()).read_all()
    except Exception as exc:  # noqa: BLE001 - mapped for the assertions
        raise map_error(exc) from exc


def test_a_forged_grant_is_refused(cluster):
    with cluster.client() as client:
        desc = client.slice_map("t")
        smap = client._slice_maps.get("t")
        [group] = smap.groups(np.array([7, 3], dtype=np.int64))[:1]
        uri = group.nodes[0]
        grant, body = group.ticket[:len(smap.grant)], group.ticket[len(smap.grant):]
        # The genuine grant reads the rows: the forgeries below fail for their signature.
        # (Raw, in storage order: the positions travel in the pieces' metadata.)
        assert sorted(_do_get(client, uri, grant + body).column("id").to_pylist()) == [3, 7]
        name = desc["storage"].encode()
        assert grant[8:8 + len(name)] == name  # magic, version, kind, flags, u16 length
        gen = 8 + len(name)
        forged_gen = bytearray(grant)
        forged_gen[gen] ^= 0x01  # another generation of the same storage
        forged_name = bytearray(grant)
        forged_name[8] ^= 0x20  # another dataset's name (case flipped)
        unsigned = bytearray(grant[:gen + 8])
        unsigned[5] = 0  # flags: no signature
        for forged in (forged_gen, forged_name):
            with pytest.raises((icefloe.InvalidArgument, icefloe.Unauthorized),
                               match="signature mismatch"):
                _do_get(client, uri, bytes(forged) + body)
        with pytest.raises((icefloe.InvalidArgument, icefloe.Unauthorized), match="not signed"):
            _do_get(client, uri, bytes(unsigned) + body)


def test_reload_by_another_client_is_noticed(cluster, tables):
    with cluster.client() as reader, cluster.client() as other:
        assert reader.take("t", [5, 1])["id"].to_pylist() == [5, 1]
        generation = reader._slice_maps.get("t").generation
        other.evict("t")
        other.load("t", tables[1].metadata_location, batch_rows=1000)
        try:
            # The reader's map names the old generation: the nodes say so, and
            # it fetches the map again (one head call) and reads the new data.
            assert reader.take("t", [5, 1])["id"].to_pylist() == [35, 7]
            assert reader._slice_maps.get("t").generation != generation
            # A copy grown by another client's reload: a row past the old end
            # is asked of the head again, not refused on the old map's word.
            other.load("t", tables[2].metadata_location, batch_rows=1000)
            assert reader.take("t", [N + 3])["id"].to_pylist() == [3]
            # Its own reload it knows at once.
            reader.evict("t")
            reader.load("t", tables[0].metadata_location, batch_rows=1000)
            assert reader.take("t", [5, 1])["id"].to_pylist() == [5, 1]
        finally:
            other.load("t", tables[0].metadata_location, batch_rows=1000)


def test_a_killed_node_with_replication_two(tmp_path, tables):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as c:
        with c.client() as client:
            client.load("t", tables[0].metadata_location, batch_rows=1000, replication=2)
            whole = client.read("t")
            ids = _ids(np.random.default_rng(5), 4096)
            assert client.take("t", ids).equals(whole.take(ids))  # the map is cached now
            first = client.slice_map("t")["slices"][0]["nodes"][0]
            c.kill_node(c.node_uris.index(first))
            assert client.take("t", ids).equals(whole.take(ids))
            assert client.take("t", [0, N - 1])["id"].to_pylist() == [0, N - 1]


@pytest.mark.parametrize("num_sets", [1, 2, 12])
def test_groups_send_each_position_to_the_replica_set_holding_its_row(num_sets):
    """The client's grouping alone (no cluster): every position goes exactly
    once to the replica set of the slice holding its row."""
    from icefloe._slice_map import SliceMap

    sets = tuple((f"grpc://n{i}", f"grpc://m{i}") for i in range(num_sets))
    desc = {"name": "d", "storage": "d", "generation": 3, "rows": 48 * 100,
            "schema": _schema_b64(), "grant": "AAAA",
            "slices": [{"start": i * 100, "stop": (i + 1) * 100, "nodes": list(sets[i % num_sets])}
                       for i in range(48)]}
    smap = SliceMap.from_json(desc, 0.0)
    rng = np.random.default_rng(num_sets)
    for ids in ([5], [5, 5, 4799, 0], rng.integers(0, 4800, 4096)):
        ids = np.asarray(ids, dtype=np.int64)
        seen = np.zeros(len(ids), dtype=int)
        for group in smap.groups(ids):
            body = group.ticket[len(smap.grant):]
            total, n = struct.unpack_from("<II", body)
            entries = np.frombuffer(body, dtype=[("p", "<u4"), ("r", "<u8")], offset=8)
            assert total == len(ids) and n == len(entries)
            assert np.array_equal(ids[entries["p"]], entries["r"])
            assert {sets[(r // 100) % num_sets] for r in entries["r"].tolist()} == {group.nodes}
            seen[entries["p"]] += 1
        assert np.all(seen == 1)
    desc["slices"].pop(3)  # a gap: refused, never guessed around
    with pytest.raises(icefloe.Error, match="does not cover"):
        SliceMap.from_json(desc, 0.0)


def _schema_b64() -> str:
    import base64

    return base64.b64encode(pa.schema([("id", pa.int64())]).serialize().to_pybytes()).decode()


class _RendezvousNode(flight.FlightServerBase):
    """A stand-in node for the client's side of a take (no cluster): it
    answers a ticket with the rows it names as one piece (a position per row), but only once
    every other stand-in has been asked too (bounded wait, then an error)."""

    def __init__(self, table: pa.Table, asked: list, everyone: int) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self._table, self._asked, self._everyone = table, asked, everyone

    def do_get(self, context, ticket):  # noqa: ARG002
        with _LOCK:
            self._asked.append(self.port)
        deadline = time.monotonic() + 10
        while len(self._asked) < self._everyone:
            if time.monotonic() > deadline:
                raise flight.FlightServerError("the other node was never asked while this one "
                                               "waited: the client read the nodes one by one")
            time.sleep(0.005)
        total, n = struct.unpack_from("<II", ticket.ticket)
        entries = np.frombuffer(ticket.ticket, dtype=[("p", "<u4"), ("r", "<u8")], offset=8)
        rows = self._table.take(pa.array(entries["r"].astype(np.int64))).combine_chunks()
        meta = piece_util.encode(0, total, positions=entries["p"].tolist())
        batch = rows.to_batches()[0] if n else pa.RecordBatch.from_pylist([], self._table.schema)
        return flight.GeneratorStream(self._table.schema, iter([(batch, pa.py_buffer(meta))]))


_LOCK = threading.Lock()


def test_a_take_reads_its_nodes_at_once_and_puts_their_rows_in_request_order():
    """pyarrow's do_get waits for a node's first message, so a take that asked
    its nodes one after another would pay a round trip per node before the
    next starts (and here never start the second: each stand-in answers only
    once both were asked). Rows come back in request order, duplicates kept."""
    from icefloe._slice_map import Group

    table = _data(3)
    asked: list = []
    servers = [_RendezvousNode(table, asked, 2) for _ in range(2)]
    try:
        ids = np.array([7, 19_999, 3, 7, 10_000, 0], dtype=np.int64)
        mine = [np.flatnonzero(ids % 2 == k) for k in range(2)]  # odd rows on one node
        groups = []
        for server, positions in zip(servers, mine, strict=True):
            body = np.empty(len(positions), dtype=[("p", "<u4"), ("r", "<u8")])
            body["p"], body["r"] = positions, ids[positions]
            ticket = np.array([len(ids), len(positions)], dtype="<u4").tobytes() + body.tobytes()
            groups.append(Group(ticket, (f"grpc://127.0.0.1:{server.port}",), positions,
                                ids[positions]))
        with icefloe.Client("grpc://127.0.0.1:1", read_parallelism=1) as client:
            got = client._take_groups("stand-ins", ("stand-ins", 1), groups, len(ids))
        assert sorted(asked) == sorted(s.port for s in servers)
        assert got.equals(pa.Table.from_batches([table.take(ids).combine_chunks().to_batches()[0]]))
    finally:
        for s in servers:
            s.shutdown()
