"""Clustering: rewrite the small files of a partition into fewer, larger, optionally sorted new file groups
(size-based planning as Hudi's ``SparkSizeBasedClusteringPlanStrategy``, scheduling, execution)."""
