"""The content-addressed store: blobs, snapshots and restores of file trees."""

import pytest

from webgen_agent.checkpoints.store import BlobStore


def test_blobs_are_deduplicated_and_round_trip(tmp_path, db_target):
    store = BlobStore(db_target)
    data = b"hello " * 1000
    first = store.put(data)
    size_after_first = store.stored_bytes()
    assert store.put(data) == first
    assert store.stored_bytes() == size_after_first
    assert store.get(first) == data
    assert store.get_json(store.put_json({"a": [1, 2]})) == {"a": [1, 2]}


def test_snapshot_skips_dependencies_and_materialize_restores_exactly(tmp_path, db_target):
    store = BlobStore(db_target)
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "node_modules" / "react").mkdir(parents=True)
    (ws / "node_modules" / "react" / "index.js").write_text("lib")
    (ws / "src" / "App.jsx").write_text("v1")
    (ws / "package.json").write_text("{}")
    first = store.snapshot(ws)
    assert set(store.manifest(first)) == {"src/App.jsx", "package.json"}

    (ws / "src" / "App.jsx").write_text("v2")
    (ws / "src" / "extra").mkdir()
    (ws / "src" / "extra" / "new.js").write_text("new")
    second = store.snapshot(ws)
    assert second != first

    store.materialize(first, ws)
    assert (ws / "src" / "App.jsx").read_text() == "v1"
    assert not (ws / "src" / "extra").exists()
    assert (ws / "node_modules" / "react" / "index.js").read_text() == "lib"  # dependencies stay

    store.materialize(None, ws)
    assert not (ws / "package.json").exists() and not (ws / "src").exists()


def test_storage_grows_with_what_changed(tmp_path, db_target):
    store = BlobStore(db_target)
    ws = tmp_path / "ws"
    ws.mkdir()
    for n in range(40):
        (ws / f"file{n}.js").write_text(f"// file {n}\n" + "x = 1;\n" * 300)
    store.snapshot(ws)
    base = store.stored_bytes()
    (ws / "file0.js").write_text("// changed\n" + "y = 2;\n" * 300)
    store.snapshot(ws)
    grown = store.stored_bytes() - base
    assert grown < 3000  # one changed file (compressed) plus a manifest, not 40 files


def test_blob_reads_are_served_from_a_bounded_memory_cache(tmp_path, monkeypatch):
    import sqlite3

    from webgen_agent.checkpoints import store as store_module

    monkeypatch.setattr(store_module, "_CACHE_BYTES", 4000)
    monkeypatch.setattr(store_module, "_CACHE_ITEM_MAX", 2500)
    store = BlobStore(tmp_path / "db.sqlite")
    small = [store.put(f"message {n} ".encode() * 100) for n in range(3)]  # ~1 KB each
    big = store.put(b"x" * 3000)  # over the per-item bound: never cached
    # Rows gone behind the store's back: only cached blobs can still be read.
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        conn.execute("DELETE FROM blobs")
    assert [store.get(h) for h in small] == [f"message {n} ".encode() * 100 for n in range(3)]
    with pytest.raises(KeyError):  # over the per-item bound: it was never cached
        store.get(big)
    for n in range(3, 6):  # three more ~1 KB blobs push the oldest out of a 4 KB cache
        store.put(f"message {n} ".encode() * 100)
    with pytest.raises(KeyError):  # the cache is bounded by bytes
        store.get(small[0])


def test_unchanged_blobs_are_not_written_again(tmp_path, monkeypatch):
    store = BlobStore(tmp_path / "db.sqlite")
    ws = tmp_path / "ws"
    ws.mkdir()
    for n in range(10):
        (ws / f"f{n}.js").write_text(f"// {n}\n" + "x;\n" * 200)
    store.snapshot(ws)
    writes = []
    real_insert = store._table.insert
    monkeypatch.setattr(store._table, "insert", lambda *row: (writes.append(row[0]), real_insert(*row))[1])
    (ws / "f0.js").write_text("changed")
    store.snapshot(ws)
    assert len(writes) == 2  # the changed file and the new manifest
