"""GraphGPT's row of ``skicml tour``."""

import time

from ...utils.tour import TourEntry

N_TRAIN, N_TEST = 300, 200


def _morgan_fingerprints(smiles, n_bits=2048):
    """Radius-2 Morgan fingerprints (RDKit), the chemist's first baseline."""
    import numpy as np
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=n_bits)
    return np.stack([generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(s)) for s in smiles]).astype(np.float32)


def _run():
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.metrics import mean_absolute_error

    from ...datasets import HARTREE_TO_EV, qm9_split
    from ._supervised import GraphGPTRegressor

    # Molecules from the pool the shipped backbone never saw in pretraining.
    _, pool = qm9_split()
    frame = pool.sample(n=N_TRAIN + N_TEST, random_state=0)
    smiles = frame["smiles"].to_numpy(dtype=object)
    gap = frame["homo_lumo_gap"].to_numpy() * HARTREE_TO_EV
    train, test = slice(0, N_TRAIN), slice(N_TRAIN, None)

    start = time.perf_counter()
    model = GraphGPTRegressor(pretrained="graphgpt-qm9-small", max_epochs=4, batch_size=32, lr=3e-4,
                              n_views=1, random_state=0)
    predicted = model.fit(smiles[train], gap[train]).predict(smiles[test])
    seconds = time.perf_counter() - start
    forest = RandomForestRegressor(n_estimators=200, random_state=0)
    forest.fit(_morgan_fingerprints(smiles[train]), gap[train])
    baseline = forest.predict(_morgan_fingerprints(smiles[test]))
    return {"score": mean_absolute_error(gap[test], predicted),
            "baseline_score": mean_absolute_error(gap[test], baseline), "seconds": seconds}


def tour_entries():
    return [TourEntry("GraphGPTRegressor", f"QM9 HOMO-LUMO gap, {N_TRAIN} train molecules",
                      "MAE in eV (lower is better)", "RandomForest on Morgan fingerprints", _run)]
