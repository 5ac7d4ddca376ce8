"""The routing benchmark (`logicroute benchmark`) and the route-part benchmarks: bench logic|summary|index|reader."""
