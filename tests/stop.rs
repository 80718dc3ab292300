//! Stop requests (Ctrl-C in Python): a watch sees the requests made after its
//! run began. In a process of their own, since a request reaches every run
//! under way in the process (the library's other tests run CPU drivers).

use twobs::stop::{Watch, ask, watching};

#[test]
fn a_watch_sees_only_the_stops_asked_after_its_run_began() {
    ask();
    let watch = Watch::start();
    assert!(!watch.asked());
    ask();
    assert!(watch.asked());
    assert!(!Watch::start().asked());
    // A stop asked while a watched call plans or compiles reaches the watches its backends start later.
    watching(|| {
        ask();
        assert!(Watch::start().asked());
    });
    assert!(!Watch::start().asked());
}
