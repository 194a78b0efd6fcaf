import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("Buyer data redaction (DESIGN §5)")
struct RedactionTests {
    /// A v4 / ECP completed checkout carrying every kind of buyer and payment detail.
    static let v4Completed = #"""
        {"id":"gid://shopify/Checkout/rd-1","status":"completed","currency":"USD",
         "buyer":{"email":"ada@example.com","phone_number":"+15555550100","first_name":"Ada","last_name":"Lovelace","full_name":"Ada Lovelace"},
         "billing_address":{"street_address":"12 Analytical Row","address_locality":"London","postal_code":"NW1 6XE","address_country":"GB","first_name":"Ada","last_name":"Lovelace"},
         "shipping_address":{"street_address":"7 Engine Lane","address_locality":"Marylebone","postal_code":"W1U 1AA","address_country":"GB"},
         "line_items":[{"id":"li_1","item":{"id":"v1","title":"Difference Engine Poster","price":2500},"quantity":2},
                       {"id":"li_2","item":{"id":"v2","title":"Brass Gear Pin","price":400},"quantity":1}],
         "totals":[{"type":"subtotal","amount":5400},{"type":"tax","amount":432},{"type":"total","amount":5832}],
         "payment":{"selected_instrument_id":"pi_1","instruments":[{"id":"pi_1","handler_id":"shop_pay","type":"card","brand":"visa","last_digits":"4242","expiry_month":12,"expiry_year":2030,"credential":{"type":"token","token":"tok_visa_secret_999"}}]},
         "cart_token":"c1-secret-cart-token",
         "order":{"id":"gid://shopify/Order/5150","permalink_url":"https://shop.example/orders/5150"}}
        """#

    static let v4Secrets = [
        "ada@example.com", "+15555550100", "Lovelace", "Ada Lovelace", "12 Analytical Row", "NW1 6XE",
        "7 Engine Lane", "W1U 1AA", "4242", "tok_visa_secret_999", "c1-secret-cart-token", "Marylebone",
    ]

    /// The older Checkout Sheet Kit `orderDetails` shape.
    static let legacyBody = #"""
        {"orderDetails":{"id":"gid://shopify/OrderIdentity/3003","email":"grace@example.com","phone":"+15555550199",
         "billingAddress":{"address1":"1 Main St","address2":"Apt 4","city":"Ottawa","countryCode":"CA","firstName":"Grace","lastName":"Hopper","name":"Grace Hopper","phone":"+15555550198","postalCode":"K1A 0B1","zoneCode":"ON"},
         "cart":{"token":"legacy-cart-token-abc","lines":[{"title":"Mug","quantity":3,"price":{"amount":12.5,"currencyCode":"CAD"}}],
                 "price":{"total":{"amount":"41.25","currencyCode":"CAD"},"subtotal":{"amount":"37.50","currencyCode":"CAD"}}},
         "paymentMethods":[{"type":"CREDIT_CARD","details":{"brand":"VISA","lastDigits":"1881","name":"Grace Hopper"}}],
         "deliveries":[{"method":"SHIPPING","details":{"location":{"address1":"9 Compiler Way","city":"Arlington","name":"G. Hopper"}}}]}}
        """#

    static let legacySecrets = [
        "grace@example.com", "+15555550199", "+15555550198", "1 Main St", "Apt 4", "Hopper", "K1A 0B1",
        "legacy-cart-token-abc", "1881", "9 Compiler Way",
    ]

    static func v4Envelope(keep: Bool) -> Output {
        var options = EventProcessor.Options()
        options.keepBuyerData = keep
        let p = EventProcessor(options: options)
        return p.feed(Fixture.ecp("ec.complete", checkout: v4Completed))
    }

    static func legacyEnvelope(keep: Bool) -> Output {
        var options = EventProcessor.Options()
        options.keepBuyerData = keep
        let p = EventProcessor(options: options)
        return p.feed(wrap(#"{"name":"completed","body":"# + jsonStringLiteral(legacyBody) + "}", checkoutID: "legacy-9"))
    }

    @Test("v4 snapshot: no buyer or payment value appears in the envelope by default", arguments: v4Secrets)
    func v4Redacted(secret: String) {
        let out = Self.v4Envelope(keep: false)
        #expect(out.outcome == .published(.complete))
        #expect(!out.text.contains(secret))
    }

    @Test("v4 snapshot: redacted members keep their keys with the value \"[redacted]\"")
    func v4RedactedShape() {
        let out = Self.v4Envelope(keep: false)
        #expect(out["checkout.buyer"] == "[redacted]")
        #expect(out["checkout.billing_address"] == "[redacted]")
        #expect(out["checkout.shipping_address"] == "[redacted]")
        #expect(out["checkout.payment.instruments"] == "[redacted]")
        #expect(out["checkout.cart_token"] == "[redacted]")
        // Non-PII survives, including beside redacted members.
        #expect(out["checkout.payment.selected_instrument_id"] == "pi_1")
        #expect(out["checkout.line_items.0.item.title"] == "Difference Engine Poster")
        #expect(out["checkout.line_items.1.item.title"] == "Brass Gear Pin")
        #expect(out["checkout.totals.2.amount"] == 5832)
        #expect(out["checkout.order.id"] == "gid://shopify/Order/5150")
        #expect(out["checkout.status"] == "completed")
        #expect(out["summary.total"] == 5832)
        #expect(out["summary.subtotal"] == 5400)
        #expect(out["summary.item_quantity"] == 3)
        #expect(out["summary.order_id"] == "gid://shopify/Order/5150")
    }

    @Test("v4 snapshot: keepBuyerData keeps every value", arguments: v4Secrets)
    func v4Kept(secret: String) {
        let out = Self.v4Envelope(keep: true)
        #expect(out.text.contains(secret))
    }

    @Test("v4 snapshot with keepBuyerData is carried unchanged")
    func v4KeptWhole() throws {
        let out = Self.v4Envelope(keep: true)
        let original = try #require(J.parse(Array(Self.v4Completed.utf8)))
        #expect(out["checkout"] == original)
        #expect(out["checkout.buyer.email"] == "ada@example.com")
    }

    @Test("older orderDetails: email, phone, billing address, payment details, deliveries and cart token are redacted",
          arguments: legacySecrets)
    func legacyRedacted(secret: String) {
        let out = Self.legacyEnvelope(keep: false)
        #expect(out.outcome == .published(.complete))
        #expect(!out.text.contains(secret))
    }

    @Test("older orderDetails: redacted members keep their keys; titles and totals survive")
    func legacyRedactedShape() {
        let out = Self.legacyEnvelope(keep: false)
        let details = "checkout.orderDetails"
        #expect(out["\(details).email"] == "[redacted]")
        #expect(out["\(details).phone"] == "[redacted]")
        #expect(out["\(details).billingAddress"] == "[redacted]")
        #expect(out["\(details).cart.token"] == "[redacted]")
        #expect(out["\(details).paymentMethods.0.details"] == "[redacted]")
        #expect(out["\(details).paymentMethods.0.type"] == "CREDIT_CARD")
        #expect(out["\(details).deliveries.0.details"] == "[redacted]")
        #expect(out["\(details).deliveries.0.method"] == "SHIPPING")
        #expect(out["\(details).cart.lines.0.title"] == "Mug")
        #expect(out["\(details).cart.price.total.amount"] == "41.25")
        #expect(out["\(details).id"] == "gid://shopify/OrderIdentity/3003")
        #expect(out["summary.total"] == 4125)
        #expect(out["summary.currency"] == "CAD")
    }

    @Test("older orderDetails: keepBuyerData keeps every value", arguments: legacySecrets)
    func legacyKept(secret: String) {
        let out = Self.legacyEnvelope(keep: true)
        #expect(out.text.contains(secret))
    }

    @Test("details outside payment methods are not buyer data; a token is a credential wherever it is")
    func contextualKeysOnlyInContext() {
        let p = EventProcessor()
        let out = p.feed(Fixture.ecp("ec.start", checkout: #"{"id":"ck-1","links":[{"type":"terms","token":"t-9"}],"line_items":[{"details":"gift wrap"}]}"#))
        #expect(out["checkout.links.0.token"] == "[redacted]")
        #expect(out["checkout.line_items.0.details"] == "gift wrap")
    }

    @Test("escaped key spellings are redacted too")
    func escapedKeys() {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"onUpdate","checkout":{"id":"ck-1","\u0065mail":"sneaky@example.com","buyer":{"email":"x@example.com"}}}"#)
        #expect(out.outcome == .published(.update))
        #expect(!out.text.contains("sneaky@example.com"))
        #expect(!out.text.contains("x@example.com"))
    }

    @Test("a Primer payment is written without buyer fields but keeps the payment result")
    func primerPayment() {
        let p = EventProcessor()
        let out = p.feed(wrap(#"{"state":"success","paymentResult":{"paymentId":"pay_9","status":"SUCCESS","amount":500,"currencyCode":"EUR","paymentMethodType":"PAYMENT_CARD","card":{"last4Digits":"0005"},"email":"pm@example.com"}}"#,
                              sdk: "primer"))
        #expect(out["payment.paymentId"] == "pay_9")
        #expect(out["payment.card"] == "[redacted]")
        #expect(out["payment.email"] == "[redacted]")
        #expect(!out.text.contains("0005"))
    }

    /// UCP/ECP snapshots carry the shipping address as a postal address inside
    /// `fulfillment.methods[].destinations[]` (`street_address`, `postal_code`, …). The redactor
    /// only knows container names (`shipping_address`, `address`, …) and the name/phone keys, so
    /// the street and postal code of an `ec.fulfillment.change` snapshot pass through.
    @Test("a fulfillment destination's street address is redacted (ECP ec.fulfillment.change)")
    func fulfillmentDestination() {
        let checkout = #"""
            {"id":"ck-ful","status":"incomplete","currency":"USD",
             "fulfillment":{"methods":[{"id":"m1","type":"shipping","line_item_ids":["li_1"],"selected_destination_id":"d1",
               "destinations":[{"id":"d1","street_address":"221B Baker Street","address_locality":"London","postal_code":"NW1 6XE","address_country":"GB","first_name":"Sherlock","last_name":"Holmes","phone_number":"+442079460000"}],
               "groups":[{"id":"g1","selected_option_id":"o1","options":[{"id":"o1","title":"Standard","totals":[{"type":"total","amount":500}]}]}]}]}}
            """#
        let p = EventProcessor()
        let out = p.feed(Fixture.ecp("ec.fulfillment.change", checkout: checkout))
        #expect(out.outcome == .published(.update))
        #expect(!out.text.contains("Holmes"))
        #expect(!out.text.contains("+442079460000"))
        #expect(!out.text.contains("221B Baker Street"))
        #expect(!out.text.contains("NW1 6XE"))
        #expect(out["checkout.fulfillment.methods.0.groups.0.options.0.title"] == "Standard")
    }

    /// Spellings that reached subscribers before names were folded: PascalCase and upper case from
    /// .NET and other bridges, and names the list did not hold.
    static let leakedKeys = [
        "Email", "EMAIL", "PhoneNumber", "LastName", "FirstName", "EmailAddress", "mobile", "mobileNumber",
        "mobile_number", "cardholderName", "cardholder_name", "nameOnCard", "customer_email", "customerEmail",
        "buyerEmail", "contactEmail", "contact_email", "billingEmail", "clientIp", "client_ip", "remoteIp",
        "ipAddress", "IPAddress", "BillingAddress", "default_address", "Phone", "telephone", "zipCode",
    ]

    @Test("a member named for buyer data in any case or separator spelling is redacted", arguments: leakedKeys)
    func foldedSpellings(key: String) {
        let secret = "v-\(key)-4242@example.com"
        let (k, v) = (jsonStringLiteral(key), jsonStringLiteral(secret))
        let checkout = #"{"id":"ck-fold","status":"incomplete","currency":"USD",\#(k):\#(v),"nested":{\#(k):{"v":\#(v)}}}"#
        let out = EventProcessor().feed(Fixture.ecp("ec.buyer.change", checkout: checkout))
        #expect(out.outcome == .published(.update))
        #expect(out["checkout.\(key)"] == "[redacted]")
        #expect(out["checkout.nested.\(key)"] == "[redacted]")
        #expect(out["checkout.status"] == "incomplete")
        #expect(!out.text.contains(secret))
    }

    @Test("a Primer payment's customer keeps no contact detail (mobileNumber beside emailAddress and the names)")
    func primerCustomer() {
        let p = EventProcessor()
        let payload = #"""
            {"state":"success",
             "paymentResult":{"paymentId":"pay_7","status":"SUCCESS","amount":1999,"currencyCode":"GBP",
             "customer":{"customerId":"cus_42","emailAddress":"p@example.com","mobileNumber":"+447700900123",
                         "firstName":"Pat","lastName":"Primer","nationalDocumentId":"AB123456C"},
             "cardholderName":"Pat Primer","clientIp":"203.0.113.9"}}
            """#
        let out = p.feed(wrap(payload, sdk: "primer"))
        #expect(out.outcome == .published(.complete))
        for secret in ["p@example.com", "+447700900123", "Pat", "Primer", "AB123456C", "203.0.113.9"] {
            #expect(!out.text.contains(secret), "\(secret)")
        }
        #expect(out["payment.customer.mobileNumber"] == "[redacted]")
        #expect(out["payment.customer.emailAddress"] == "[redacted]")
        #expect(out["payment.cardholderName"] == "[redacted]")
        #expect(out["payment.clientIp"] == "[redacted]")
        #expect(out["payment.customer.customerId"] == "cus_42")
        #expect(out["payment.paymentId"] == "pay_7")
    }

    @Test("names about contact data, not the data itself, are kept with their values")
    func keptNeighbours() {
        let checkout = #"""
            {"id":"ck-keep","status":"incomplete","currency":"USD","title":"Order","name":"Summer sale",
             "emailVerified":true,"email_verified":false,"emailMarketingConsent":{"state":"subscribed"},
             "customer_id":"cus_1","shipping":{"amount":500},"line_items":[{"id":"li_1","quantity":2,"title":"Mug"}]}
            """#
        let out = EventProcessor().feed(Fixture.ecp("ec.buyer.change", checkout: checkout))
        #expect(out.outcome == .published(.update))
        #expect(out["checkout.id"] == "ck-keep")
        #expect(out["checkout.title"] == "Order")
        #expect(out["checkout.name"] == "Summer sale")
        #expect(out["checkout.emailVerified"] == true)
        #expect(out["checkout.email_verified"] == false)
        #expect(out["checkout.emailMarketingConsent.state"] == "subscribed")
        #expect(out["checkout.customer_id"] == "cus_1")
        #expect(out["checkout.shipping.amount"] == 500)
        #expect(out["checkout.line_items.0.title"] == "Mug")
    }

    @Test("escaped spellings are folded too")
    func escapedFoldedKeys() {
        let p = EventProcessor()
        let out = p.feed(
            #"{"event":"onUpdate","checkout":{"id":"ck-2","\u0045MAIL":"upper@example.com","#
                + #""customer\u005femail":"under@example.com","Mobile\u004eumber":"+15550000"}}"#)
        #expect(out.outcome == .published(.update))
        #expect(!out.text.contains("upper@example.com"))
        #expect(!out.text.contains("under@example.com"))
        #expect(!out.text.contains("+15550000"))
    }

    @Test("BuyerDataRedactor.write copies non-buyer JSON verbatim")
    func writerVerbatim() throws {
        let text = #"{"a":[1,2.50,{"b":"c\n"}],"d":null,"e":true}"#
        let doc = try #require(document(text))
        var w = JSONWriter()
        BuyerDataRedactor.write(doc, doc.root, to: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == text)
    }
}
