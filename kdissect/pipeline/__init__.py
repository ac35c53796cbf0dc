"""Captures -> tables of exchanges (and records): in one process with pyarrow, or on
Apache Spark. Needs the ``kdissect[spark]`` extra (pyarrow; pyspark for Spark)."""
