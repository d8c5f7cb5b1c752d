"""The content-addressed store: blobs, snapshots and restores of file trees."""

from webgen_agent.checkpoints.store import BlobStore


def test_blobs_are_deduplicated_and_round_trip(tmp_path):
    store = BlobStore(tmp_path / "db.sqlite")
    data = b"hello " * 1000
    first = store.put(data)
    size_after_first = store.stored_bytes()
    assert store.put(data) == first
    assert store.stored_bytes() == size_after_first
    assert store.get(first) == data
    assert store.get_json(store.put_json({"a": [1, 2]})) == {"a": [1, 2]}


def test_snapshot_skips_dependencies_and_materialize_restores_exactly(tmp_path):
    store = BlobStore(tmp_path / "db.sqlite")
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "node_modules" / "react").mkdir(parents=True)
    (ws / "node_modules" / "react" / "index.js").write_text("lib")
    (ws / "src" / "App.jsx").write_text("v1")
    (ws / "package.json").write_text("{}")
    first = store.snapshot(ws)
    assert set(store.manifest(first)) == {"src/App.jsx", "package.json"}

    (ws / "src" / "App.jsx").write_text("v2")
    (ws / "src" / "extra" ).mkdir()
    (ws / "src" / "extra" / "new.js").write_text("new")
    second = store.snapshot(ws)
    assert second != first

    store.materialize(first, ws)
    assert (ws / "src" / "App.jsx").read_text() == "v1"
    assert not (ws / "src" / "extra").exists()
    assert (ws / "node_modules" / "react" / "index.js").read_text() == "lib"  # dependencies stay

    store.materialize(None, ws)
    assert not (ws / "package.json").exists() and not (ws / "src").exists()


def test_storage_grows_with_what_changed(tmp_path):
    store = BlobStore(tmp_path / "db.sqlite")
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
