module ttft

go 1.19
