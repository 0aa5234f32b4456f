package io.kafkathrottle.shim;

import java.util.Arrays;

/**
 * The factor of one quota type through its current quota epoch, and the two things the shim
 * derives from it: the factor Kafka's quota sensors are given, and when a new epoch (fresh
 * sensors, through a new metric tag) starts. Immutable and pure: time comes in as arguments.
 *
 * <p>Why (Kafka 4.1, see {@link QuotaWindow}): a sensor throttles a client when the bytes it holds,
 * divided by the span D they cover (11 to 12 s once steady), exceed its bound, and then for
 * (bytes / D − bound) / bound × D, served in full even if the bound rises meanwhile. Both plain
 * ways of telling Kafka a lower factor fail during a fill. Lowering the bound of the sensors at
 * once charges the bytes the old factor let in against the new one: a throttle of many seconds
 * that outlives the volume being freed. Fresh sensors forget those bytes, but a fresh sensor
 * divides by at least (samples − 1) windows however young it is, so it lets 10 s worth of its
 * bound through before it throttles anybody; started every few seconds along a ramp, they never
 * throttle at all.
 *
 * <p>The rule:
 * <ul>
 * <li>Kafka is given the factor averaged over the span its window covers, each moment counted at
 *     the highest factor in force since. A fall reaches Kafka only as fast as its window forgets
 *     the bytes of the old factor, so a producer held to its quota moves to the new rate at once,
 *     each request throttled for about its own size; a rise reaches Kafka at once.
 * <li>In an epoch younger than Kafka's window the average counts the epoch's own time only (from
 *     one tick before it began, as Kafka re-reads a bound once a tick): a fresh sensor is given
 *     the factor times its age over the (samples − 1) windows it divides by, so it has no
 *     allowance to spend.
 * <li>Never less than the floor, and in a fresh epoch the floor grows: a young sensor's allowance
 *     under a fixed bound does not grow until it has (samples − 1) samples, so a client held at
 *     the floor (a pause) could write nothing after its first allowance, and each request would
 *     add a second of throttle to the next. Raised by {@link #floorGrowth}, the floor lets the
 *     allowance grow at the floor's rate from the start.
 * <li>A new epoch starts on a pause, and when the factor falls below {@value #EPOCH_DROP} of the
 *     highest factor Kafka held over the last span of this epoch: the bytes a sensor holds were let
 *     in under at most that factor, so keeping the sensors throttles for at most (1 / 0.8 − 1) × D,
 *     a quarter of Kafka's window (3 s with the defaults). A steeper fall starts fresh sensors.
 * </ul>
 * Controller mutations are measured with a token bucket (KIP-599), which keeps no window to
 * forgive: their factor goes to Kafka as it is, and their epoch changes only on a pause.
 */
final class FactorTrack {
    static final double EPOCH_DROP = 0.8;
    /** The first epoch began with the shim: no young sensors to allow for. */
    private static final long SINCE_EVER = Long.MIN_VALUE;

    final long epoch;
    private final boolean windowed;
    private final long startNanos;
    private final long[] times; // when each factor came into force, ascending
    private final double[] factors;

    private FactorTrack(long epoch, boolean windowed, long startNanos, long[] times, double[] factors) {
        this.epoch = epoch;
        this.windowed = windowed;
        this.startNanos = startNanos;
        this.times = times;
        this.factors = factors;
    }

    /** The track of a type whose quotas Kafka measures with a sample window (produce, fetch, request) or not. */
    static FactorTrack starting(double factor, boolean windowed) {
        return new FactorTrack(0, windowed, SINCE_EVER, new long[] {SINCE_EVER}, new double[] {factor});
    }

    /** The factor in force. */
    double factor() {
        return factors[factors.length - 1];
    }

    /** The track once {@code factor} is in force from {@code nowNanos}: the same epoch, or a new one. */
    FactorTrack next(double factor, long nowNanos, QuotaWindow window) {
        double previous = factor();
        if (factor == previous) {
            return this;
        }
        long now = Math.max(nowNanos, times[times.length - 1]);
        boolean paused = factor <= 0.0 && previous > 0.0;
        boolean steep = windowed && factor < previous && factor < EPOCH_DROP * heldMax(now, window);
        if (paused || steep) {
            return new FactorTrack(epoch + 1, windowed, now, new long[] {now}, new double[] {factor});
        }
        // Kafka's factor looks back one span, the highest held factor one span from each moment before.
        long cutoff = now - 2 * window.spanNanos();
        int first = 0;
        while (first + 1 < times.length && times[first + 1] <= cutoff) {
            first++;
        }
        long[] nextTimes = Arrays.copyOfRange(times, first, times.length + 1);
        double[] nextFactors = Arrays.copyOfRange(factors, first, factors.length + 1);
        nextTimes[nextTimes.length - 1] = now;
        nextFactors[nextFactors.length - 1] = factor;
        return new FactorTrack(epoch, windowed, startNanos, nextTimes, nextFactors);
    }

    /** The factor Kafka's sensors of this type are given at {@code nowNanos}: in (0, 1) while throttling. */
    double kafkaFactor(long nowNanos, QuotaWindow window) {
        return kafkaFactorAt(nowNanos, window, times.length);
    }

    /**
     * How many times the floor Kafka's sensors of this type are given at {@code nowNanos}: 1 once
     * the epoch is a span old; before, what a young sensor needs for its allowance to be its first
     * one (the floor over the (samples − ½) windows it divides by) plus the floor for every second
     * since the epoch began, over what it divides by now.
     */
    double floorGrowth(long nowNanos, QuotaWindow window) {
        if (startNanos == SINCE_EVER || !windowed) {
            return 1.0;
        }
        long age = nowNanos - startNanos + window.tickNanos();
        if (age >= window.spanNanos()) {
            return 1.0;
        }
        long young = window.divisorNanos(0);
        return (double) (young + age) / window.divisorNanos(age);
    }

    /** Kafka's factor at {@code at} from the first {@code count} change points (those in force by then). */
    private double kafkaFactorAt(long at, QuotaWindow window, int count) {
        double factor = factors[count - 1];
        if (!windowed || factor >= 1.0 || factor <= 0.0) {
            return factor;
        }
        boolean first = startNanos == SINCE_EVER;
        // A fresh epoch counts as one tick old: its first bound stands until Kafka re-reads it.
        long start = first ? SINCE_EVER : startNanos - window.tickNanos();
        long divisor = window.divisorNanos(first ? Long.MAX_VALUE : at - start);
        long from = first ? at - divisor : Math.max(start, at - divisor);
        if (times[count - 1] <= from && (first || at - start >= divisor)) {
            return factor; // the window holds this factor only
        }
        double held = 0.0;
        double highest = factor;
        long end = at;
        for (int i = count - 1; i >= 0 && end > from; i--) {
            highest = Math.max(highest, factors[i]);
            long begin = i == 0 ? from : Math.max(times[i], from);
            if (end > begin) {
                held += highest * (end - begin);
                end = begin;
            }
        }
        // Above 0 while the factor is: 0 means a pause to the resolver.
        return Math.max(held / divisor, Double.MIN_NORMAL);
    }

    /** The highest factor Kafka held over the last span of this epoch, up to {@code now}. */
    private double heldMax(long now, QuotaWindow window) {
        long from = startNanos == SINCE_EVER ? now - window.spanNanos() : Math.max(startNanos, now - window.spanNanos());
        double highest = 0.0;
        int count = times.length;
        for (long at = now; at >= from; at -= window.tickNanos()) {
            while (count > 1 && times[count - 1] > at) {
                count--;
            }
            highest = Math.max(highest, kafkaFactorAt(at, window, count));
        }
        for (int i = 0; i < times.length; i++) {
            if (times[i] >= from && times[i] <= now) {
                highest = Math.max(highest, kafkaFactorAt(times[i], window, i + 1)); // just after each change
            }
        }
        return highest;
    }

    @Override
    public String toString() {
        return "FactorTrack[epoch " + epoch + ", factor " + factor() + ", " + times.length + " changes]";
    }
}
