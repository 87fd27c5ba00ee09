import pytest

from tests.harness.storage_cluster import StorageCluster


@pytest.fixture
async def cluster_factory(tmp_path):
    clusters: list[StorageCluster] = []

    async def make(bookies: int = 3, bookie_args: tuple[str, ...] = ()) -> StorageCluster:
        cluster = StorageCluster(tmp_path / f"cluster-{len(clusters)}", bookie_args)
        clusters.append(cluster)
        return await cluster.start(bookies)

    yield make
    for cluster in clusters:
        await cluster.stop()
