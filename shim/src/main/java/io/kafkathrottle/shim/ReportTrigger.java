package io.kafkathrottle.shim;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * When this node sends its next volume report: at the poll interval as ever, and, while the service says what to report
 * on ({@link ReportLevels}), at once when a sample of its file stores shows that a volume crossed a level or moved by
 * more than the move share of its total since the report last sent. Pure: the reporter thread hands it the time and
 * its samples; it never reads a clock or a file store itself, and allocates nothing per sample.
 *
 * <ul>
 * <li>Levels: a dir that holds data is compared with the data limit's levels and with its take-hold level (bytes,
 * hysteresis the data limit's or the move share of its total, whichever is larger); a dir that holds the metadata log
 * with the metadata limit's. A volume crosses a level downward at the level, upward above the level plus the hysteresis,
 * so a volume that hovers at a level reports once, not at every sample. A level new to a dir starts on the side where
 * the last report sent put the volume: a crossing since then is reported.
 * <li>Rate: the service's own pace, a token bucket of {@code burst} reports refilled one per {@code min_interval_ms}
 * (counted from each report's answer, so never faster than the service counts): a crossing goes at once while a token
 * is left, otherwise as soon as one is; a report for a move alone needs two (one stays in hand for a crossing, when the
 * burst allows) and goes at most once a second; a crossing is not held back by that second. After a refusal that asks
 * the shim to wait (429 Retry-After, or a service that takes no reports) nothing is sent before the wait is over, and
 * nothing is sampled meanwhile.
 * <li>Without levels (an older service, or before the first table) the reports go at the poll interval only, exactly as
 * before, and nothing is sampled.
 * </ul>
 */
final class ReportTrigger {
    enum Reason {
        /** Nothing to send now. */
        NONE,
        /** The regular report (the first, and one per poll interval). */
        DUE,
        /** A volume crossed a level. */
        CROSSING,
        /** A volume's usable bytes moved by more than the move share of its total since the last report. */
        MOVE
    }

    /** The least time between two reports sent for a move alone. */
    static final long MOVE_SPACING_NANOS = Duration.ofSeconds(1).toNanos();

    /** One level a dir is compared with, and on which side of it the volume is. */
    private static final class Watch {
        final boolean ratio;
        final double level;
        final double hysteresis;
        boolean below;
        boolean known; // false until a measurement placed the volume

        Watch(boolean ratio, double level, double hysteresis) {
            this.ratio = ratio;
            this.level = level;
            this.hysteresis = hysteresis;
        }

        boolean sameAs(Watch other) {
            return ratio == other.ratio && level == other.level && hysteresis == other.hysteresis;
        }

        void place(long total, long usable) {
            below = measure(total, usable) <= level;
            known = true;
        }

        double measure(long total, long usable) {
            return ratio ? (double) usable / total : usable;
        }
    }

    private static final Watch[] NONE_WATCHED = new Watch[0];

    private final long pollNanos;
    private final String[] dirs;
    private final boolean[] metadataDir;
    private final boolean[] holdsData;
    private final long[] sentTotals;
    private final long[] sentUsables;
    private ReportLevels levels;
    private Watch[][] watches;
    private boolean watchesStale = true;
    private boolean started; // the first report was sent
    private boolean backingOff; // the service asked the shim to wait until dueAt
    private long dueAt;
    private long holdUntil; // no crossing report before (a token is back, or the service's wait is over)
    private long moveHoldUntil; // no move report before
    private long credit; // the bucket when tokensAt, in nanoseconds of min_interval_ms (one token: one interval)
    private long tokensAt;
    private boolean counting; // the bucket is counted (from the first report answered while levels were known)
    private long lastMoveAt;
    private boolean moved; // a move was sent at lastMoveAt
    private boolean crossingPending;
    private boolean movePending;

    ReportTrigger(Duration pollInterval, List<NodeVolumes.Directory> directories) {
        this.pollNanos = pollInterval.toNanos();
        int count = directories.size();
        this.dirs = new String[count];
        this.metadataDir = new boolean[count];
        this.holdsData = new boolean[count];
        this.sentTotals = new long[count];
        this.sentUsables = new long[count];
        for (int d = 0; d < count; d++) {
            NodeVolumes.Directory directory = directories.get(d);
            dirs[d] = directory.path().toString();
            metadataDir[d] = directory.metadata();
            holdsData[d] = directory.data();
        }
        Arrays.fill(sentTotals, -1);
        Arrays.fill(sentUsables, -1);
        this.watches = new Watch[count][];
        Arrays.fill(watches, NONE_WATCHED);
    }

    /** What the service says to report on now (null: nothing; the poll interval only). */
    void levels(ReportLevels next) {
        if (next != levels) {
            levels = next;
            watchesStale = true;
            if (next == null) {
                crossingPending = false;
                movePending = false;
            }
        }
    }

    ReportLevels levels() {
        return levels;
    }

    /** Whether the reporter samples its file stores before {@link #evaluate} (otherwise the samples are not read). */
    boolean samples() {
        return started && levels != null && !backingOff;
    }

    /** What to send at {@code now}, after a sample ({@code totals}, {@code usables} per directory; -1: not read). */
    Reason evaluate(long now, long[] totals, long[] usables) {
        if (!started) {
            return Reason.DUE;
        }
        if (!samples()) {
            return now - dueAt >= 0 ? Reason.DUE : Reason.NONE;
        }
        if (watchesStale) {
            rebuild();
        }
        double share = levels.moveShare;
        boolean move = false;
        for (int d = 0; d < dirs.length; d++) {
            long total = totals[d];
            long usable = usables[d];
            if (total <= 0 || usable < 0) {
                continue;
            }
            for (Watch watch : watches[d]) {
                if (!watch.known) {
                    watch.place(total, usable);
                    continue;
                }
                double measured = watch.measure(total, usable);
                if (!watch.below) {
                    if (measured <= watch.level) {
                        watch.below = true;
                        crossingPending = true;
                    }
                } else if (measured > watch.level + watch.hysteresis) {
                    watch.below = false;
                    crossingPending = true;
                }
            }
            long sent = sentUsables[d];
            if (sent >= 0 && Math.abs(usable - sent) > share * total) {
                move = true;
            }
        }
        movePending = move;
        if (crossingPending && now - holdUntil >= 0) {
            return Reason.CROSSING;
        }
        if (movePending && now - moveHoldUntil >= 0 && (!moved || now - (lastMoveAt + MOVE_SPACING_NANOS) >= 0)) {
            return Reason.MOVE;
        }
        return now - dueAt >= 0 ? Reason.DUE : Reason.NONE;
    }

    /**
     * A report for {@code reason} was sent, its answer came at {@code now}; {@code next}: how long until the regular
     * report (the poll interval, or longer when the service asked the shim to wait). {@code report}: what was sent (null:
     * nothing was measured).
     */
    void sent(long now, Reason reason, NodeVolumes.Report report, Duration next) {
        started = true;
        long nextNanos = next.toNanos();
        dueAt = now + nextNanos;
        backingOff = nextNanos > pollNanos;
        takeToken(now);
        if (backingOff) {
            holdUntil = dueAt;
            moveHoldUntil = dueAt;
        } else {
            holdUntil = whenTokens(now, 1);
            moveHoldUntil = whenTokens(now, levels == null || levels.burst < 2 ? 1 : 2);
        }
        if (reason == Reason.MOVE) {
            moved = true;
            lastMoveAt = now;
        }
        crossingPending = false;
        movePending = false;
        if (report != null) {
            System.arraycopy(report.totals(), 0, sentTotals, 0, sentTotals.length);
            System.arraycopy(report.usables(), 0, sentUsables, 0, sentUsables.length);
            if (!Arrays.equals(report.holdsData(), holdsData)) {
                System.arraycopy(report.holdsData(), 0, holdsData, 0, holdsData.length);
                watchesStale = true;
            }
        }
    }

    /** The bucket after a report answered at {@code now}: refilled up to then, less the report's token. */
    private void takeToken(long now) {
        if (levels == null || levels.minIntervalMs <= 0) {
            counting = false;
            return;
        }
        long interval = levels.minIntervalMs * 1_000_000L;
        long full = interval * levels.burst;
        // Reports before the levels were known went a poll interval apart: the service's bucket is full by now.
        long refilled = counting ? Math.min(full, credit + Math.max(0, now - tokensAt)) : full;
        counting = true;
        credit = Math.max(0, refilled - interval);
        tokensAt = now;
    }

    /** When the bucket holds {@code wanted} tokens again (now when it does). */
    private long whenTokens(long now, int wanted) {
        long needed = levels == null ? 0 : levels.minIntervalMs * 1_000_000L * wanted;
        return credit >= needed ? now : now + (needed - credit);
    }

    /** When to sample (and judge) next, at the latest; {@code sampleNanos}: the sample interval. */
    long nextWake(long now, long sampleNanos) {
        if (!started) {
            return now;
        }
        if (!samples()) {
            return dueAt;
        }
        long wake = earlier(now + sampleNanos, dueAt);
        if (crossingPending) {
            wake = earlier(wake, holdUntil);
        } else if (movePending) {
            wake = earlier(wake, moved ? later(moveHoldUntil, lastMoveAt + MOVE_SPACING_NANOS) : moveHoldUntil);
        }
        return later(wake, now);
    }

    private static long earlier(long a, long b) {
        return a - b <= 0 ? a : b;
    }

    private static long later(long a, long b) {
        return a - b >= 0 ? a : b;
    }

    /** The watches of each dir for the levels now, each placed where the last report put its volume. */
    private void rebuild() {
        watchesStale = false;
        ReportLevels now = levels;
        List<Watch> list = new ArrayList<>();
        for (int d = 0; d < dirs.length; d++) {
            list.clear();
            long total = sentTotals[d];
            if (holdsData[d]) {
                add(list, now.data);
                Long takeHold = now.takeHold.get(dirs[d]);
                if (takeHold != null) {
                    double dataHysteresis = now.data.ratio() ? now.data.hysteresis() * Math.max(total, 0) : now.data.hysteresis();
                    list.add(new Watch(false, takeHold, Math.max(dataHysteresis, now.moveShare * Math.max(total, 0))));
                }
            }
            if (metadataDir[d] && now.metadata != null) {
                add(list, now.metadata);
            }
            Watch[] next = list.toArray(NONE_WATCHED);
            for (Watch watch : next) {
                Watch same = null;
                for (Watch old : watches[d]) {
                    if (old.known && old.sameAs(watch)) {
                        same = old;
                    }
                }
                if (same != null) {
                    watch.below = same.below;
                    watch.known = true;
                } else if (total > 0 && sentUsables[d] >= 0) {
                    watch.place(total, sentUsables[d]);
                }
            }
            watches[d] = next;
        }
    }

    private static void add(List<Watch> list, ReportLevels.Limit limit) {
        for (double level : limit.levels()) {
            list.add(new Watch(limit.ratio(), level, limit.hysteresis()));
        }
    }
}
