"""The Flower side of a run: the bundled apps, the engines that run them (in this process, through ``flwr run``,
on a local deployment, on a Ray cluster) and the processes and environment those engines start and clean up."""
