"""PF-XAB over the landmine sites; then each site's tuned (C, gamma) and its AUC there, in the Result and a file."""

import json

import numpy as np
from flwr.app import Array, ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from pfxab_flower.strategies import PFXAB

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = context.run_config
    strategy = PFXAB(num_clients=int(config["num-clients"]), horizon=int(config["horizon"]),
                     alpha=float(config["alpha"]), seed=int(config["seed"]), reward_range=(0.0, 1.0))
    result = strategy.start(grid=grid)
    points, nodes = result.arrays["final-points"].numpy(), result.arrays["client-nodes"].numpy()
    asked = [Message(RecordDict({"point": ConfigRecord({"C": float(C), "gamma": float(gamma)})}),
                     message_type="query", dst_node_id=int(node))
             for node, (C, gamma) in zip(nodes, points, strict=True) if node and np.all(np.isfinite([C, gamma]))]
    aucs = {reply.metadata.src_node_id: float(reply.content.config_records["auc"]["auc"])
            for reply in grid.send_and_receive(asked, timeout=60.0) if not reply.has_error()}
    site_auc = np.array([aucs.get(int(node), np.nan) for node in nodes])
    result.arrays["site-auc"] = Array(site_auc)
    sites = [{"client": m, "flower_node": int(node), "site": strategy.driver.sites.get(m),
              "C": float(C), "gamma": float(gamma), "auc": None if np.isnan(value) else float(value)}
             for m, (node, (C, gamma), value) in enumerate(zip(nodes, points, site_auc, strict=True))]
    with open(config["out"], "w", encoding="utf-8") as file:
        json.dump({"sites": sites, "lost_clients": strategy.lost_clients}, file, indent=1)
    print(json.dumps(sites))
