package io.kafkathrottle.shim;

import java.util.function.Supplier;

import org.apache.kafka.common.utils.Time;

/** Kafka's Time on a simulated clock that the shim reads too (its nanoseconds are the shim's clock). */
final class SimulatedTime implements Time {
    private long nanos = 1_000_000_000_000L;

    @Override
    public long milliseconds() {
        return nanos / 1_000_000;
    }

    @Override
    public long nanoseconds() {
        return nanos;
    }

    @Override
    public void sleep(long ms) {
        nanos += ms * 1_000_000;
    }

    @Override
    public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) {
        throw new UnsupportedOperationException("simulated time");
    }
}
