"""What every georep process runs on: starting and stopping processes, waiting with a time
limit, one retry policy for every long-lived loop, the console's error lines, TLS files
and a loopback CA for one machine."""
