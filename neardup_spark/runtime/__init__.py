"""Where the job runs: the SparkSession, the local Python worker daemon, the JVM class archive."""
