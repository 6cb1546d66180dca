"""The arms of an X-armed bandit: the search space, its hierarchical partition, and the reward noise."""
