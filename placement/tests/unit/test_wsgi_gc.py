"""The WSGI app collects the young generation rarely: an answer's few
thousand live dicts must not be walked by the collector while built."""
import gc

from placement.wsgi import api


def test_answer_sized_burst_triggers_no_collection():
    saved = gc.get_threshold()
    started = []

    def watch(phase, info):
        if phase == 'start':
            started.append(info['generation'])

    try:
        api.tune_gc()
        gc.collect()
        gc.callbacks.append(watch)
        try:
            body = [{'resources': {'VCPU': {'capacity': i}}}
                    for i in range(5000)]
        finally:
            gc.callbacks.remove(watch)
        assert len(body) == 5000
        assert started == []
    finally:
        gc.set_threshold(*saved)


def test_older_generations_keep_their_ratios():
    saved = gc.get_threshold()
    try:
        api.tune_gc()
        young, *older = gc.get_threshold()
        assert young == api.YOUNG_COLLECTION_THRESHOLD
        assert older == list(saved[1:])
    finally:
        gc.set_threshold(*saved)
