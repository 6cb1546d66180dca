"""Each SuperNode is one landmine field: its objective is its own SVM's held-out AUC, from its own file."""

from flwr.app import ConfigRecord, Context, Message, RecordDict

from pfxab_flower.client_apps import from_context, objective_client_app
from pfxab_flower.problems.landmine_sites import DOMAIN, site_objective


def make_objective(context: Context):
    """The site's objective, from the file its node config names (each node loads it once)."""
    return site_objective(context.node_config["data-path"])


app = objective_client_app(from_context(make_objective), DOMAIN, evaluation="deterministic", value_range=(0.0, 1.0))


@app.query()
def auc(message: Message, context: Context) -> Message:
    """The site's AUC at the (C, gamma) the server asks about (its tuned point, after the run)."""
    point = message.content.config_records["point"]
    value = float(site_objective(context.node_config["data-path"])([[point["C"], point["gamma"]]])[0])
    return Message(RecordDict({"auc": ConfigRecord({"auc": value})}), reply_to=message)
